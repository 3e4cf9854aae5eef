/* One-value HDF5 attributes, written and read in the form tfenc and h5py
 * write them: the output file (its provenance, its checks, --status, a
 * resume's identity), the sparse CSR's attributes, the tokenizer store,
 * the int8 calibration and anyone reading a root or group attribute. */
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

/* Writes a one-value attribute of `object` from `value` (of `memory_type`):
 * an attribute of that name is overwritten in place (an older file's
 * keeps its stored type, converted to), else one of `file_type` is made.
 * 0, or -1 with HDF5's error stack left for the caller's message. */
int tfenc_hdf5_write_attribute(hid_t object, const char *name, hid_t file_type,
                               hid_t memory_type, const void *value);
/* The same for a variable-length UTF-8 string; NULL writes "". */
int tfenc_hdf5_write_string_attribute(hid_t object, const char *name, const char *value);

#endif
