/* The file-size check after HDF5 reads (core/base/hdf5_intact.h). */
#include "base/hdf5_intact.h"

#include <sys/stat.h>

/* The file's current size, from the descriptor HDF5 reads through when it
 * uses the sec2 driver (the same file, whatever has been renamed over its
 * path since), else from the path. -1 when neither can be examined. */
static long long current_size(hid_t file, const char *path)
{
    struct stat info;
    hid_t access = H5Fget_access_plist(file);
    hid_t driver = access >= 0 ? H5Pget_driver(access) : -1;
    int *descriptor = NULL;
    int through_descriptor = driver == H5FD_SEC2 &&
                             H5Fget_vfd_handle(file, H5P_DEFAULT, (void **)&descriptor) >= 0 &&
                             descriptor != NULL;
    if (access >= 0)
        H5Pclose(access);
    H5Eclear2(H5E_DEFAULT);
    if (through_descriptor)
        return fstat(*descriptor, &info) == 0 ? (long long)info.st_size : -1;
    return stat(path, &info) == 0 ? (long long)info.st_size : -1;
}

int tfenc_hdf5_check_intact(tfenc_context *ctx, hid_t file, const char *path,
                            const char *dataset)
{
    haddr_t end = 0;
    int known = H5Fget_eoa(file, &end) >= 0;
    H5Eclear2(H5E_DEFAULT);
    long long size = current_size(file, path);
    if (!known || size < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot tell whether the file is whole after "
                           "reading '%s'", path, dataset);
    if ((unsigned long long)size < (unsigned long long)end)
        return tfenc_error(ctx, TFENC_ERR_IO,
                           "%s: the file is %lld bytes now, shorter than the %llu its HDF5 "
                           "structure needs: it was truncated while this job read '%s' (what "
                           "lies past its end would read as zeros); restore it and run the job "
                           "again", path, size, (unsigned long long)end, dataset);
    return TFENC_OK;
}
