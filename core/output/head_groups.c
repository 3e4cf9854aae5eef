/* Walking the further heads' groups of a file (head_groups.h). */
#include "output/head_groups.h"

int tfenc_head_groups_visit(tfenc_context *ctx, const char *path, hid_t file,
                            tfenc_head_group_visit visit, void *user)
{
    if (H5Lexists(file, "outputs", H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return TFENC_OK;
    }
    hid_t outputs = H5Gopen2(file, "outputs", H5P_DEFAULT);
    H5G_info_t info;
    if (outputs < 0 || H5Gget_info(outputs, &info) < 0) {
        if (outputs >= 0)
            H5Gclose(outputs);
        H5Eclear2(H5E_DEFAULT);
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: /outputs is not a group of "
                           "heads", path);
    }
    int status = TFENC_OK;
    for (hsize_t i = 0; status == TFENC_OK && i < info.nlinks; i++) {
        char name[256];
        if (H5Lget_name_by_idx(outputs, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                               H5P_DEFAULT) < 0) {
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot list /outputs", path);
            break;
        }
        hid_t group = H5Gopen2(outputs, name, H5P_DEFAULT);
        H5Eclear2(H5E_DEFAULT);
        if (group < 0) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: /outputs/%s is not a "
                                 "group (a head's output)", path, name);
            break;
        }
        status = visit(user, group, name);
        H5Gclose(group);
    }
    H5Gclose(outputs);
    H5Eclear2(H5E_DEFAULT);
    return status;
}
