// Parquet through Arrow's C++ library: open a file, check its columns'
// types, and hand out one row group's strings at a time. Every Arrow status
// and exception becomes a status and a reason: nothing escapes into C.
#include "input/parquet_reader.h"

#include <cstdio>
#include <memory>
#include <new>
#include <string>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>

#include "tfenc/plugin.h"

namespace {

// One column of the loaded row group, whatever its string or integer type.
struct Column {
    std::shared_ptr<arrow::ChunkedArray> data;
    std::vector<int64_t> chunk_starts;  // first row of each chunk, then the total

    void reset(std::shared_ptr<arrow::ChunkedArray> d)
    {
        data = std::move(d);
        chunk_starts.clear();
        int64_t start = 0;
        for (const auto &chunk : data->chunks()) {
            chunk_starts.push_back(start);
            start += chunk->length();
        }
        chunk_starts.push_back(start);
    }

    // The chunk holding `row`, and the row's index in it.
    const arrow::Array *locate(int64_t row, int64_t *index) const
    {
        size_t c = 0;
        while (c + 1 < chunk_starts.size() && chunk_starts[c + 1] <= row)
            c++;
        *index = row - chunk_starts[c];
        return data->chunk((int)c).get();
    }

    // The value of `row` as bytes; false for a null.
    bool get(int64_t row, std::string &scratch, const char **bytes, size_t *length) const
    {
        int64_t i;
        const arrow::Array *array = locate(row, &i);
        if (array->IsNull(i))
            return false;
        if (array->type_id() == arrow::Type::DICTIONARY) {
            auto dictionary = static_cast<const arrow::DictionaryArray *>(array);
            int64_t index = dictionary->GetValueIndex(i);
            array = dictionary->dictionary().get();
            i = index;
            if (array->IsNull(i))
                return false;
        }
        std::string_view view;
        switch (array->type_id()) {
        case arrow::Type::STRING:
            view = static_cast<const arrow::StringArray *>(array)->GetView(i);
            break;
        case arrow::Type::LARGE_STRING:
            view = static_cast<const arrow::LargeStringArray *>(array)->GetView(i);
            break;
        case arrow::Type::STRING_VIEW:
            view = static_cast<const arrow::StringViewArray *>(array)->GetView(i);
            break;
        default: {
            auto scalar = array->GetScalar(i);
            scratch = scalar.ok() ? (*scalar)->ToString() : std::string();
            *bytes = scratch.c_str();
            *length = scratch.size();
            return true;
        }
        }
        // NUL-terminated for the C side: copied, as Arrow's buffers are not.
        scratch.assign(view.data(), view.size());
        *bytes = scratch.c_str();
        *length = scratch.size();
        return true;
    }
};

// What a kept column's values are: strings, integers or floats (a column
// of type null: nulls); TFENC_KEPT_ABSENT for a type that is none of them.
tfenc_kept_type kept_type(const std::shared_ptr<arrow::DataType> &type)
{
    switch (type->id()) {
    case arrow::Type::NA:
        return TFENC_KEPT_NULL;
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW:
        return TFENC_KEPT_STRING;
    case arrow::Type::INT8:
    case arrow::Type::INT16:
    case arrow::Type::INT32:
    case arrow::Type::INT64:
    case arrow::Type::UINT8:
    case arrow::Type::UINT16:
    case arrow::Type::UINT32:
        return TFENC_KEPT_INTEGER;
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE:
        return TFENC_KEPT_FLOAT;
    case arrow::Type::DICTIONARY:
        return kept_type(static_cast<const arrow::DictionaryType &>(*type).value_type());
    default:
        return TFENC_KEPT_ABSENT;
    }
}

// A column of type null (pyarrow's type for an empty or all-null list) is
// accepted: its values are nulls, which the caller refuses row by row.
bool is_string(const std::shared_ptr<arrow::DataType> &type)
{
    tfenc_kept_type kept = kept_type(type);
    return kept == TFENC_KEPT_STRING || kept == TFENC_KEPT_NULL;
}

bool is_integer(const std::shared_ptr<arrow::DataType> &type)
{
    if (type->id() == arrow::Type::DICTIONARY)
        return is_integer(static_cast<const arrow::DictionaryType &>(*type).value_type());
    return type->id() == arrow::Type::NA || arrow::is_integer(type->id());
}

int fail(char *why, size_t why_size, int status, const std::string &reason)
{
    std::snprintf(why, why_size, "%s", reason.c_str());
    return status;
}

}  // namespace

struct tfenc_parquet {
    std::unique_ptr<parquet::arrow::FileReader> file;
    int text_index = -1, pair_index = -1, id_index = -1;
    Column text, pair, id;
    std::string text_scratch, pair_scratch, id_scratch;
    std::vector<int> keep_index;            // [n_keep] the kept columns
    std::vector<tfenc_kept_type> keep_type; // [n_keep] what each holds
    std::vector<Column> keep;
    std::vector<std::string> keep_scratch;
};

extern "C" int tfenc_parquet_open(const char *path, const char *text_column,
                                  const char *pair_column, const char *id_column,
                                  const char *const *keep_columns, int n_keep,
                                  tfenc_parquet **out, char *why, size_t why_size)
{
    *out = nullptr;
    try {
        auto reader = std::make_unique<tfenc_parquet>();
        auto opened = arrow::io::ReadableFile::Open(path);
        if (!opened.ok())
            return fail(why, why_size, TFENC_ERR_IO, opened.status().message());
        auto status = parquet::arrow::OpenFile(*opened, arrow::default_memory_pool(),
                                               &reader->file);
        if (!status.ok())
            return fail(why, why_size, TFENC_ERR_INPUT, "not a Parquet file: " + status.message());
        std::shared_ptr<arrow::Schema> schema;
        status = reader->file->GetSchema(&schema);
        if (!status.ok())
            return fail(why, why_size, TFENC_ERR_INPUT, "unreadable schema: " + status.message());
        reader->text_index = schema->GetFieldIndex(text_column);
        if (reader->text_index < 0)
            return fail(why, why_size, TFENC_ERR_INPUT,
                        std::string("no column '") + text_column + "' (text_field)");
        auto text_type = schema->field(reader->text_index)->type();
        if (!is_string(text_type))
            return fail(why, why_size, TFENC_ERR_INPUT,
                        std::string("column '") + text_column + "' (text_field) holds " +
                            text_type->ToString() + ", not strings");
        if (pair_column != nullptr) {
            reader->pair_index = schema->GetFieldIndex(pair_column);
            if (reader->pair_index < 0)
                return fail(why, why_size, TFENC_ERR_INPUT,
                            std::string("no column '") + pair_column + "' (text_pair_field)");
            auto pair_type = schema->field(reader->pair_index)->type();
            if (!is_string(pair_type))
                return fail(why, why_size, TFENC_ERR_INPUT,
                            std::string("column '") + pair_column + "' (text_pair_field) holds " +
                                pair_type->ToString() + ", not strings");
        }
        if (id_column != nullptr) {
            reader->id_index = schema->GetFieldIndex(id_column);
            if (reader->id_index < 0)
                return fail(why, why_size, TFENC_ERR_INPUT,
                            std::string("no column '") + id_column + "' (id_field)");
            auto id_type = schema->field(reader->id_index)->type();
            if (!is_string(id_type) && !is_integer(id_type))
                return fail(why, why_size, TFENC_ERR_INPUT,
                            std::string("column '") + id_column + "' (id_field) holds " +
                                id_type->ToString() + ", not strings or integers");
        }
        for (int k = 0; k < n_keep; k++) {
            int index = schema->GetFieldIndex(keep_columns[k]);
            if (index < 0)
                return fail(why, why_size, TFENC_ERR_INPUT,
                            std::string("no column '") + keep_columns[k] + "' (keep_fields)");
            auto type = schema->field(index)->type();
            tfenc_kept_type kept = kept_type(type);
            if (kept == TFENC_KEPT_ABSENT)
                return fail(why, why_size, TFENC_ERR_INPUT,
                            std::string("column '") + keep_columns[k] + "' (keep_fields) holds " +
                                type->ToString() + "; a kept field holds strings, integers, "
                                "numbers or null");
            reader->keep_index.push_back(index);
            reader->keep_type.push_back(kept);
        }
        reader->keep.resize((size_t)n_keep);
        reader->keep_scratch.resize((size_t)n_keep);
        *out = reader.release();
        return TFENC_OK;
    } catch (const std::bad_alloc &) {
        return fail(why, why_size, TFENC_ERR_NO_MEMORY, "out of memory");
    } catch (const std::exception &e) {
        return fail(why, why_size, TFENC_ERR_INPUT, std::string("not a Parquet file: ") + e.what());
    }
}

extern "C" int64_t tfenc_parquet_rows(const tfenc_parquet *reader)
{
    return reader->file->parquet_reader()->metadata()->num_rows();
}

extern "C" int tfenc_parquet_row_groups(const tfenc_parquet *reader)
{
    return reader->file->num_row_groups();
}

extern "C" int64_t tfenc_parquet_row_group_rows(const tfenc_parquet *reader, int group)
{
    return reader->file->parquet_reader()->metadata()->RowGroup(group)->num_rows();
}

extern "C" int tfenc_parquet_load_row_group(tfenc_parquet *reader, int group, char *why,
                                            size_t why_size)
{
    try {
        std::vector<int> columns{reader->text_index};
        if (reader->pair_index >= 0)
            columns.push_back(reader->pair_index);
        if (reader->id_index >= 0)
            columns.push_back(reader->id_index);
        for (int index : reader->keep_index)
            columns.push_back(index);
        std::shared_ptr<arrow::Table> table;
        auto status = reader->file->ReadRowGroup(group, columns, &table);
        if (!status.ok())
            return fail(why, why_size, status.IsOutOfMemory() ? TFENC_ERR_NO_MEMORY
                                                              : TFENC_ERR_INPUT,
                        status.message());
        int next = 0;
        reader->text.reset(table->column(next++));
        if (reader->pair_index >= 0)
            reader->pair.reset(table->column(next++));
        if (reader->id_index >= 0)
            reader->id.reset(table->column(next++));
        for (auto &column : reader->keep)
            column.reset(table->column(next++));
        return TFENC_OK;
    } catch (const std::bad_alloc &) {
        return fail(why, why_size, TFENC_ERR_NO_MEMORY, "out of memory");
    } catch (const std::exception &e) {
        return fail(why, why_size, TFENC_ERR_INPUT, e.what());
    }
}

extern "C" void tfenc_parquet_row(tfenc_parquet *reader, int64_t row, const char **text,
                                  size_t *length, const char **id, size_t *id_length)
{
    *text = *id = nullptr;
    *length = *id_length = 0;
    if (!reader->text.get(row, reader->text_scratch, text, length))
        *text = nullptr;
    if (reader->id_index >= 0 && !reader->id.get(row, reader->id_scratch, id, id_length))
        *id = nullptr;
}

extern "C" void tfenc_parquet_pair_text(tfenc_parquet *reader, int64_t row, const char **text,
                                        size_t *length)
{
    *text = nullptr;
    *length = 0;
    if (reader->pair_index >= 0 && !reader->pair.get(row, reader->pair_scratch, text, length))
        *text = nullptr;
}

extern "C" void tfenc_parquet_kept(tfenc_parquet *reader, int64_t row, int k,
                                   tfenc_kept_value *value)
{
    *value = tfenc_kept_value{};
    value->type = TFENC_KEPT_NULL;
    const Column &column = reader->keep[(size_t)k];
    int64_t i;
    const arrow::Array *array = column.locate(row, &i);
    if (array->IsNull(i))
        return;
    switch (reader->keep_type[(size_t)k]) {
    case TFENC_KEPT_STRING: {
        const char *bytes;
        size_t length;
        if (column.get(row, reader->keep_scratch[(size_t)k], &bytes, &length)) {
            value->type = TFENC_KEPT_STRING;
            value->string = bytes;
            value->length = length;
        }
        return;
    }
    case TFENC_KEPT_INTEGER:
    case TFENC_KEPT_FLOAT: {
        if (array->type_id() == arrow::Type::DICTIONARY) {
            auto dictionary = static_cast<const arrow::DictionaryArray *>(array);
            i = dictionary->GetValueIndex(i);
            array = dictionary->dictionary().get();
            if (array->IsNull(i))
                return;
        }
        value->type = reader->keep_type[(size_t)k];
        switch (array->type_id()) {
        case arrow::Type::INT8: value->integer = static_cast<const arrow::Int8Array *>(array)->Value(i); break;
        case arrow::Type::INT16: value->integer = static_cast<const arrow::Int16Array *>(array)->Value(i); break;
        case arrow::Type::INT32: value->integer = static_cast<const arrow::Int32Array *>(array)->Value(i); break;
        case arrow::Type::INT64: value->integer = static_cast<const arrow::Int64Array *>(array)->Value(i); break;
        case arrow::Type::UINT8: value->integer = static_cast<const arrow::UInt8Array *>(array)->Value(i); break;
        case arrow::Type::UINT16: value->integer = static_cast<const arrow::UInt16Array *>(array)->Value(i); break;
        case arrow::Type::UINT32: value->integer = static_cast<const arrow::UInt32Array *>(array)->Value(i); break;
        case arrow::Type::FLOAT: value->real = static_cast<const arrow::FloatArray *>(array)->Value(i); break;
        case arrow::Type::DOUBLE: value->real = static_cast<const arrow::DoubleArray *>(array)->Value(i); break;
        default: value->type = TFENC_KEPT_NULL; break; // kept_type() admits no other
        }
        return;
    }
    default:
        return;
    }
}

extern "C" void tfenc_parquet_close(tfenc_parquet *reader)
{
    delete reader;
}
