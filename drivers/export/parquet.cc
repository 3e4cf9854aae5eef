// tfenc-export's Parquet files through Arrow's C++ Parquet writer: the
// schema from the column descriptions, each block of rows one row group
// built over the caller's buffers (no copy but the list offsets, which
// Arrow wants as int32). Every Arrow status and exception becomes a
// status and one line naming the file: nothing escapes into C.
#include "export/parquet.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/util/compression.h>
#include <arrow/util/config.h>
#include <parquet/arrow/writer.h>
#include <parquet/exception.h>

#include <climits>
#include <memory>
#include <new>
#include <string>
#include <vector>

struct export_parquet_file {
    std::string path;
    std::vector<export_column> columns;
    std::vector<std::string> names; // the columns' names, owned
    std::shared_ptr<arrow::Schema> schema;
    std::shared_ptr<arrow::io::FileOutputStream> sink;
    std::unique_ptr<parquet::arrow::FileWriter> writer;
};

namespace {

std::shared_ptr<arrow::DataType> element_type(export_element element)
{
    switch (element) {
    case EXPORT_FLOAT32:
        return arrow::float32();
    case EXPORT_INT8:
        return arrow::int8();
    case EXPORT_UINT8:
        return arrow::uint8();
    case EXPORT_INT32:
        return arrow::int32();
    case EXPORT_INT64:
        return arrow::int64();
    case EXPORT_FLOAT64:
        return arrow::float64();
    case EXPORT_STRING:
        return arrow::utf8();
    }
    return nullptr;
}

size_t element_size(export_element element)
{
    switch (element) {
    case EXPORT_INT8:
    case EXPORT_UINT8:
        return 1;
    case EXPORT_FLOAT32:
    case EXPORT_INT32:
        return 4;
    case EXPORT_INT64:
    case EXPORT_FLOAT64:
        return 8;
    case EXPORT_STRING:
        return 1;
    }
    return 0;
}

// Children are named "item", as pyarrow names them; no value is ever null.
std::shared_ptr<arrow::Field> item(std::shared_ptr<arrow::DataType> type)
{
    return arrow::field("item", std::move(type), false);
}

std::shared_ptr<arrow::DataType> sparse_entry_type()
{
    return arrow::struct_({arrow::field("index", arrow::int32(), false),
                           arrow::field("value", arrow::float32(), false)});
}

std::shared_ptr<arrow::DataType> column_type(const export_column &column)
{
    auto element = element_type(column.element);
    switch (column.shape) {
    case EXPORT_SCALAR:
        return element;
    case EXPORT_VECTOR:
        return arrow::fixed_size_list(item(element), (int32_t)column.width);
    case EXPORT_LIST:
        return arrow::list(item(element));
    case EXPORT_VECTOR_LIST:
        return arrow::list(item(arrow::fixed_size_list(item(element), (int32_t)column.width)));
    case EXPORT_SPARSE:
        return arrow::list(item(sparse_entry_type()));
    }
    return nullptr;
}

std::shared_ptr<arrow::Buffer> wrap(const void *data, size_t bytes)
{
    return std::make_shared<arrow::Buffer>(static_cast<const uint8_t *>(data),
                                           static_cast<int64_t>(bytes));
}

std::shared_ptr<arrow::ArrayData> primitive(std::shared_ptr<arrow::DataType> type,
                                            int64_t length, const void *values, size_t size)
{
    return arrow::ArrayData::Make(std::move(type), length,
                                  {nullptr, wrap(values, (size_t)length * size)}, 0);
}

// A block's offsets as Arrow's int32 ones, kept in `store` for the write.
// False when they do not fit (a block is far smaller: the caller bounds it).
bool narrow_offsets(const int64_t *offsets, int64_t n_rows, std::vector<int32_t> &store)
{
    if (offsets[n_rows] > INT32_MAX)
        return false;
    store.resize((size_t)n_rows + 1);
    for (int64_t i = 0; i <= n_rows; i++)
        store[(size_t)i] = (int32_t)offsets[i];
    return true;
}

// A nullable column's valid flags as Arrow's validity bitmap, kept in
// `store` for the write; nullptr for a column without nulls.
std::shared_ptr<arrow::Buffer> validity(const export_column &column, int64_t n_rows,
                                        const export_column_data &data,
                                        std::vector<uint8_t> &store)
{
    if (!column.nullable || data.valid == nullptr)
        return nullptr;
    store.assign((size_t)(n_rows + 7) / 8, 0);
    for (int64_t i = 0; i < n_rows; i++)
        if (data.valid[i])
            store[(size_t)i / 8] |= (uint8_t)(1u << (i % 8));
    return wrap(store.data(), store.size());
}

// Column `column`'s array of one block over the caller's buffers.
arrow::Result<std::shared_ptr<arrow::Array>>
make_array(const export_column &column, const std::shared_ptr<arrow::DataType> &type,
           int64_t n_rows, const export_column_data &data, std::vector<int32_t> &offsets,
           std::vector<uint8_t> &bitmap)
{
    auto element = element_type(column.element);
    const size_t size = element_size(column.element);
    std::shared_ptr<arrow::ArrayData> array;
    if (column.shape != EXPORT_SCALAR && column.shape != EXPORT_VECTOR
        && !narrow_offsets(data.offsets, n_rows, offsets))
        return arrow::Status::CapacityError("column '", column.name, "': ",
                                            data.offsets[n_rows], " values in one row group");
    switch (column.shape) {
    case EXPORT_SCALAR: {
        auto valid = validity(column, n_rows, data, bitmap);
        const int64_t nulls = valid != nullptr ? arrow::kUnknownNullCount : 0;
        if (column.element == EXPORT_STRING) {
            if (!narrow_offsets(data.offsets, n_rows, offsets))
                return arrow::Status::CapacityError("column '", column.name, "': ",
                                                    data.offsets[n_rows], " bytes of strings");
            array = arrow::ArrayData::Make(
                type, n_rows,
                {valid, wrap(offsets.data(), offsets.size() * sizeof(int32_t)),
                 wrap(data.values, (size_t)data.offsets[n_rows])},
                nulls);
        } else {
            array = arrow::ArrayData::Make(
                type, n_rows, {valid, wrap(data.values, (size_t)n_rows * size)}, nulls);
        }
        break;
    }
    case EXPORT_VECTOR:
        array = arrow::ArrayData::Make(
            type, n_rows, {nullptr},
            {primitive(element, n_rows * column.width, data.values, size)}, 0);
        break;
    case EXPORT_LIST:
        array = arrow::ArrayData::Make(
            type, n_rows, {nullptr, wrap(offsets.data(), offsets.size() * sizeof(int32_t))},
            {primitive(element, offsets.back(), data.values, size)}, 0);
        break;
    case EXPORT_VECTOR_LIST: {
        auto vector_type = static_cast<const arrow::ListType &>(*type).value_type();
        auto vectors = arrow::ArrayData::Make(
            vector_type, offsets.back(), {nullptr},
            {primitive(element, (int64_t)offsets.back() * column.width, data.values, size)}, 0);
        array = arrow::ArrayData::Make(
            type, n_rows, {nullptr, wrap(offsets.data(), offsets.size() * sizeof(int32_t))},
            {vectors}, 0);
        break;
    }
    case EXPORT_SPARSE: {
        const int64_t entries = offsets.back();
        auto pairs = arrow::ArrayData::Make(
            sparse_entry_type(), entries, {nullptr},
            {primitive(arrow::int32(), entries, data.indices, sizeof(int32_t)),
             primitive(arrow::float32(), entries, data.values, sizeof(float))},
            0);
        array = arrow::ArrayData::Make(
            type, n_rows, {nullptr, wrap(offsets.data(), offsets.size() * sizeof(int32_t))},
            {pairs}, 0);
        break;
    }
    }
    return arrow::MakeArray(array);
}

// zstd where this Arrow has it (pyarrow's wheels do), else snappy, else none.
arrow::Compression::type best_codec()
{
    for (auto codec : {arrow::Compression::ZSTD, arrow::Compression::SNAPPY})
        if (arrow::util::Codec::IsAvailable(codec))
            return codec;
    return arrow::Compression::UNCOMPRESSED;
}

int fail(tfenc_context *ctx, int status, const std::string &path, const std::string &what)
{
    return tfenc_error(ctx, status, "%s: %s", path.c_str(), what.c_str());
}

} // namespace

extern "C" const char *export_parquet_library(void)
{
    return "Apache Arrow " ARROW_VERSION_STRING;
}

extern "C" int export_parquet_create(tfenc_context *ctx, const char *path,
                                     const export_column *columns, int n_columns,
                                     const char *const *keys, const char *const *values,
                                     int n_metadata, export_parquet_file **out)
{
    *out = nullptr;
    try {
        auto file = std::make_unique<export_parquet_file>();
        file->path = path;
        file->columns.assign(columns, columns + n_columns);
        arrow::FieldVector fields;
        // Dictionaries only where values repeat (ids may, source files do):
        // a dictionary of floats would be dropped page after page anyway.
        parquet::WriterProperties::Builder properties;
        properties.compression(best_codec())->disable_dictionary();
        for (int c = 0; c < n_columns; c++) {
            file->names.emplace_back(columns[c].name);
            fields.push_back(arrow::field(columns[c].name, column_type(columns[c]),
                                          columns[c].nullable != 0));
            if (columns[c].shape == EXPORT_SCALAR && columns[c].element == EXPORT_STRING)
                properties.enable_dictionary(columns[c].name);
        }
        // The copies' names point at the file's own strings (not the caller's).
        for (int c = 0; c < n_columns; c++)
            file->columns[(size_t)c].name = file->names[(size_t)c].c_str();
        auto metadata = std::make_shared<arrow::KeyValueMetadata>();
        for (int i = 0; i < n_metadata; i++)
            metadata->Append(keys[i], values[i]);
        file->schema = arrow::schema(fields, metadata);
        auto opened = arrow::io::FileOutputStream::Open(path);
        if (!opened.ok())
            return fail(ctx, TFENC_ERR_IO, path, "cannot create it: " + opened.status().message());
        file->sink = *opened;
        // The Arrow schema travels in the file, so that readers get the
        // fixed-size lists and int8 back as they were written.
        auto arrow_properties = parquet::ArrowWriterProperties::Builder().store_schema()->build();
        auto writer = parquet::arrow::FileWriter::Open(*file->schema, arrow::default_memory_pool(),
                                                       file->sink, properties.build(),
                                                       arrow_properties);
        if (!writer.ok()) {
            (void)file->sink->Close();
            return fail(ctx, TFENC_ERR_IO, path, "cannot start a Parquet file: " +
                                                    writer.status().message());
        }
        file->writer = std::move(*writer);
        *out = file.release();
        return TFENC_OK;
    } catch (const std::bad_alloc &) {
        return fail(ctx, TFENC_ERR_NO_MEMORY, path, "out of memory");
    } catch (const std::exception &e) {
        return fail(ctx, TFENC_ERR_IO, path, std::string("cannot start a Parquet file: ") +
                                                 e.what());
    }
}

extern "C" int export_parquet_write(tfenc_context *ctx, export_parquet_file *file,
                                    int64_t n_rows, const export_column_data *data)
{
    try {
        std::vector<std::vector<int32_t>> offsets(file->columns.size());
        std::vector<std::vector<uint8_t>> bitmaps(file->columns.size());
        arrow::ArrayVector arrays;
        for (size_t c = 0; c < file->columns.size(); c++) {
            auto array = make_array(file->columns[c], file->schema->field((int)c)->type(), n_rows,
                                    data[c], offsets[c], bitmaps[c]);
            if (!array.ok())
                return fail(ctx, TFENC_ERR_INTERNAL, file->path, array.status().message());
            arrays.push_back(*array);
        }
        auto batch = arrow::RecordBatch::Make(file->schema, n_rows, arrays);
        auto valid = batch->Validate();
        if (!valid.ok())
            return fail(ctx, TFENC_ERR_INTERNAL, file->path, "a block of rows is not what its "
                                                             "schema says: " + valid.message());
        auto table = arrow::Table::FromRecordBatches(file->schema, {batch});
        if (!table.ok())
            return fail(ctx, TFENC_ERR_INTERNAL, file->path, table.status().message());
        // One row group per block: WriteTable encodes it before returning,
        // so the caller's buffers may be reused.
        auto written = file->writer->WriteTable(**table, n_rows);
        if (!written.ok())
            return fail(ctx, TFENC_ERR_IO, file->path, "cannot write rows: " + written.message());
        return TFENC_OK;
    } catch (const std::bad_alloc &) {
        return fail(ctx, TFENC_ERR_NO_MEMORY, file->path, "out of memory");
    } catch (const std::exception &e) {
        return fail(ctx, TFENC_ERR_IO, file->path, std::string("cannot write rows: ") + e.what());
    }
}

extern "C" int export_parquet_close(tfenc_context *ctx, export_parquet_file *file)
{
    std::unique_ptr<export_parquet_file> owned(file);
    try {
        auto closed = file->writer->Close();
        if (closed.ok())
            closed = file->sink->Close();
        if (!closed.ok())
            return fail(ctx, TFENC_ERR_IO, file->path, "cannot finish the file: " +
                                                           closed.message());
        return TFENC_OK;
    } catch (const std::exception &e) {
        return fail(ctx, TFENC_ERR_IO, file->path, std::string("cannot finish the file: ") +
                                                       e.what());
    }
}

extern "C" void export_parquet_abandon(export_parquet_file *file)
{
    if (file == nullptr)
        return;
    std::unique_ptr<export_parquet_file> owned(file);
    try {
        // The writer's destructor would write a footer: close the file under it first.
        (void)file->sink->Close();
        file->writer.reset();
    } catch (const std::exception &) {
        // leaving: the caller removes the file
    }
}
