/* One-value attributes written and read in the form tfenc writes them
 * (see hdf5_attributes.h). */
#include "config.h"

#include "base/hdf5_attributes.h"

#include <stdlib.h>
#include <string.h>

/* An attribute's handles: all -1 when it is absent. */
typedef struct attribute_handles {
    hid_t attribute, type, space;
} attribute_handles;

/* Opens attribute `name`: 1 when it holds one value (H5Aread of an array
 * would write past the one value a reader gives it), else 0. Close the
 * handles with close_attribute whatever this returns. */
static int open_one_value(hid_t file, const char *name, attribute_handles *handles)
{
    *handles = (attribute_handles){-1, -1, -1};
    if (H5Aexists(file, name) <= 0)
        return 0;
    handles->attribute = H5Aopen(file, name, H5P_DEFAULT);
    handles->type = handles->attribute >= 0 ? H5Aget_type(handles->attribute) : -1;
    handles->space = handles->attribute >= 0 ? H5Aget_space(handles->attribute) : -1;
    return handles->type >= 0 && handles->space >= 0 &&
           H5Sget_simple_extent_npoints(handles->space) == 1;
}

static void close_attribute(attribute_handles *handles)
{
    if (handles->space >= 0)
        H5Sclose(handles->space);
    if (handles->type >= 0)
        H5Tclose(handles->type);
    if (handles->attribute >= 0)
        H5Aclose(handles->attribute);
    H5Eclear2(H5E_DEFAULT);
}

char *tfenc_hdf5_attribute_string(hid_t file, const char *name)
{
    char *copy = NULL;
    attribute_handles stored;
    hid_t type = -1;
    if (open_one_value(file, name, &stored) && H5Tget_class(stored.type) == H5T_STRING &&
        (type = H5Tcopy(H5T_C_S1)) >= 0 && H5Tset_cset(type, H5Tget_cset(stored.type)) >= 0) {
        if (H5Tis_variable_str(stored.type) > 0) {
            char *value = NULL;
            if (H5Tset_size(type, H5T_VARIABLE) >= 0 &&
                H5Aread(stored.attribute, type, &value) >= 0) {
                copy = strdup(value != NULL ? value : "");
                H5Dvlen_reclaim(type, stored.space, H5P_DEFAULT, &value);
            }
        } else {
            /* Fixed-length: what h5py writes for numpy byte strings. */
            size_t size = H5Tget_size(stored.type);
            copy = calloc(size + 1, 1);
            if (copy != NULL &&
                (H5Tset_size(type, size) < 0 || H5Aread(stored.attribute, type, copy) < 0)) {
                free(copy);
                copy = NULL;
            }
        }
    }
    if (type >= 0)
        H5Tclose(type);
    close_attribute(&stored);
    return copy;
}

int tfenc_hdf5_attribute_number(hid_t file, const char *name, H5T_class_t kind,
                                  hid_t memory_type, void *value)
{
    attribute_handles stored;
    int found = open_one_value(file, name, &stored) && H5Tget_class(stored.type) == kind &&
                H5Aread(stored.attribute, memory_type, value) >= 0;
    close_attribute(&stored);
    return found;
}

int tfenc_hdf5_write_attribute(hid_t object, const char *name, hid_t file_type,
                               hid_t memory_type, const void *value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = -1;
    if (space >= 0)
        attribute = H5Aexists(object, name) > 0
                        ? H5Aopen(object, name, H5P_DEFAULT)
                        : H5Acreate2(object, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    int failed = attribute < 0 || H5Awrite(attribute, memory_type, value) < 0;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    return failed ? -1 : 0;
}

int tfenc_hdf5_write_string_attribute(hid_t object, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    const char *text = value != NULL ? value : "";
    int failed = type < 0 || H5Tset_size(type, H5T_VARIABLE) < 0
                 || H5Tset_cset(type, H5T_CSET_UTF8) < 0
                 || tfenc_hdf5_write_attribute(object, name, type, type, &text) != 0;
    if (type >= 0)
        H5Tclose(type);
    return failed ? -1 : 0;
}
