/* One-value HDF5 attributes read in the form tfenc and h5py write them:
 * the output file's checks, --status, the int8 calibration and anyone
 * reading a root or group attribute. */
#ifndef TFENC_BASE_HDF5_ATTRIBUTES_H
#define TFENC_BASE_HDF5_ATTRIBUTES_H

#include <hdf5.h>

/* A string attribute of `object` (a file or group), variable- or
 * fixed-length, as a new string; NULL when absent, not a string or not one
 * value. */
char *tfenc_hdf5_attribute_string(hid_t object, const char *name);
/* A one-value attribute of HDF5 class `kind` read as `memory_type` into
 * *value: 1 when read, 0 when absent or of another form. */
int tfenc_hdf5_attribute_number(hid_t object, const char *name, H5T_class_t kind,
                                hid_t memory_type, void *value);

#endif
