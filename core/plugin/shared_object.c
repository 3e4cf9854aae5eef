/* Shared objects examined without loading them: ELF headers bounds-checked
 * against the file size with pread(), and the .tfenc_types section read. */
#include "plugin/shared_object.h"
#include "base/files.h"

#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DECLARATION_SECTION ".tfenc_types"
/* Generous bounds for the tables read into memory: real plugins have a
 * dozen program headers, a few dozen sections and short name tables. */
#define MAX_PROGRAM_HEADERS 4096
#define MAX_SECTIONS 65535
#define MAX_SECTION_NAMES_BYTES (1 << 20)
#define MAX_DECLARATION_BYTES (1 << 16)
#define MAX_VERSION_BYTES (8 << 20)

/* Reads `length` bytes at `offset`; -1 when they are not all in the file. */
static int read_at(int descriptor, off_t size, uint64_t offset, void *buffer, size_t length)
{
    if (offset > (uint64_t)size || length > (uint64_t)size - offset)
        return -1;
    return tfenc_file_read_at(descriptor, buffer, length, offset) == 0 ? 0 : -1;
}

/* Whether [offset, offset + length) lies inside a file of `size` bytes. */
static int inside(uint64_t offset, uint64_t length, off_t size)
{
    return offset <= (uint64_t)size && length <= (uint64_t)size - offset;
}

static int fail(char *why, size_t why_size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t why_size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(why, why_size, format, args);
    va_end(args);
    return -1;
}

static int valid_type_name(const char *name)
{
    if (*name == '\0')
        return 0;
    for (const char *c = name; *c != '\0'; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return 0;
    return 1;
}

/* Splits the section's strings into type names (spaces, tabs, newlines and
 * NULs separate them; padding between source files' strings is NULs). */
static int parse_declaration(const char *bytes, size_t length, tfenc_shared_object *object,
                             char *why, size_t why_size)
{
    size_t at = 0;
    while (at < length) {
        while (at < length && strchr(" \t\n\r", bytes[at]) != NULL && bytes[at] != '\0')
            at++;
        if (at < length && bytes[at] == '\0') {
            at++;
            continue;
        }
        size_t start = at;
        while (at < length && bytes[at] != '\0' && strchr(" \t\n\r", bytes[at]) == NULL)
            at++;
        if (at == start)
            continue;
        char name[128];
        if (at - start >= sizeof name)
            return fail(why, why_size, "declares a layer type name longer than %zu bytes",
                        sizeof name - 1);
        memcpy(name, bytes + start, at - start);
        name[at - start] = '\0';
        if (!valid_type_name(name))
            return fail(why, why_size, "declares layer type '%s', not a name [a-z0-9_]+", name);
        int known = 0;
        for (int i = 0; i < object->n_types; i++)
            known |= strcmp(object->types[i], name) == 0;
        if (known)
            continue;
        if (object->n_types >= TFENC_MAX_DECLARED_TYPES)
            return fail(why, why_size, "declares more than %d layer types",
                        TFENC_MAX_DECLARED_TYPES);
        char *copy = strdup(name);
        char **grown = realloc(object->types, (size_t)(object->n_types + 1) * sizeof *grown);
        if (copy == NULL || grown == NULL) {
            free(copy);
            if (grown != NULL)
                object->types = grown;
            return fail(why, why_size, "out of memory");
        }
        object->types = grown;
        object->types[object->n_types++] = copy;
    }
    return 0;
}

/* Reads section `index` whole into a new buffer (NUL-terminated), or NULL. */
static char *read_section(int descriptor, off_t size, const ElfW(Shdr) *sections, unsigned count,
                          unsigned index, size_t limit, size_t *length)
{
    if (index >= count || sections[index].sh_type == SHT_NOBITS ||
        sections[index].sh_size > limit)
        return NULL;
    *length = (size_t)sections[index].sh_size;
    char *bytes = malloc(*length + 1);
    if (bytes != NULL &&
        read_at(descriptor, size, sections[index].sh_offset, bytes, *length) != 0) {
        free(bytes);
        return NULL;
    }
    if (bytes != NULL)
        bytes[*length] = '\0';
    return bytes;
}

/* Whether the version requirements (.gnu.version_r) name `version`: walks
 * the Verneed entries and their Vernaux records, every offset checked. */
static int requires_version(int descriptor, off_t size, const ElfW(Shdr) *sections,
                            unsigned count, const char *version)
{
    int found = 0;
    for (unsigned s = 0; s < count && !found; s++) {
        if (sections[s].sh_type != SHT_GNU_verneed)
            continue;
        size_t needs_length = 0, names_length = 0;
        char *needs = read_section(descriptor, size, sections, count, s, MAX_VERSION_BYTES,
                                   &needs_length);
        char *names = read_section(descriptor, size, sections, count, sections[s].sh_link,
                                   MAX_VERSION_BYTES, &names_length);
        size_t at = 0;
        for (unsigned entry = 0; needs != NULL && names != NULL && !found &&
                                 entry < sections[s].sh_info && at + sizeof(ElfW(Verneed)) <= needs_length;
             entry++) {
            ElfW(Verneed) need;
            memcpy(&need, needs + at, sizeof need);
            size_t aux_at = at + need.vn_aux;
            for (unsigned k = 0; k < need.vn_cnt && aux_at + sizeof(ElfW(Vernaux)) <= needs_length;
                 k++) {
                ElfW(Vernaux) aux;
                memcpy(&aux, needs + aux_at, sizeof aux);
                if (aux.vna_name < names_length && strcmp(names + aux.vna_name, version) == 0)
                    found = 1;
                if (aux.vna_next == 0)
                    break;
                aux_at += aux.vna_next;
            }
            if (need.vn_next == 0)
                break;
            at += need.vn_next;
        }
        free(needs);
        free(names);
    }
    return found;
}

/* Checks the section table and reads the declaration, if any. */
static int examine_sections(int descriptor, off_t size, const ElfW(Ehdr) *header,
                            tfenc_shared_object *object, char *why, size_t why_size)
{
    if (header->e_shnum == 0)
        return 0; /* no section table (stripped hard): nothing declared */
    if (header->e_shentsize != sizeof(ElfW(Shdr)))
        return fail(why, why_size, "section headers of %u bytes, expected %zu",
                    (unsigned)header->e_shentsize, sizeof(ElfW(Shdr)));
    uint64_t table_bytes = (uint64_t)header->e_shnum * sizeof(ElfW(Shdr));
    if (!inside(header->e_shoff, table_bytes, size))
        return fail(why, why_size,
                    "its section table ends at byte %llu but the file has only %lld bytes "
                    "(truncated copy?)",
                    (unsigned long long)(header->e_shoff + table_bytes), (long long)size);
    ElfW(Shdr) *sections = malloc((size_t)table_bytes);
    if (sections == NULL)
        return fail(why, why_size, "out of memory");
    int result = 0;
    char *names = NULL, *declaration = NULL;
    if (read_at(descriptor, size, header->e_shoff, sections, (size_t)table_bytes) != 0) {
        result = fail(why, why_size, "cannot read its section table");
        goto done;
    }
    for (unsigned i = 0; i < header->e_shnum; i++)
        if (sections[i].sh_type != SHT_NOBITS && sections[i].sh_type != SHT_NULL &&
            !inside(sections[i].sh_offset, sections[i].sh_size, size)) {
            result = fail(why, why_size,
                          "section %u ends at byte %llu but the file has only %lld bytes "
                          "(truncated copy?)",
                          i, (unsigned long long)(sections[i].sh_offset + sections[i].sh_size),
                          (long long)size);
            goto done;
        }
    unsigned names_index = header->e_shstrndx;
    if (names_index == SHN_XINDEX)
        names_index = sections[0].sh_link; /* the real index, when it does not fit 16 bits */
    if (names_index == SHN_UNDEF)
        goto done; /* no section names: nothing can be declared */
    size_t names_bytes = 0, length = 0;
    if (names_index >= header->e_shnum || sections[names_index].sh_type != SHT_STRTAB ||
        (names = read_section(descriptor, size, sections, header->e_shnum, names_index,
                              MAX_SECTION_NAMES_BYTES, &names_bytes)) == NULL) {
        result = fail(why, why_size, "its section name table is malformed");
        goto done;
    }
    object->uses_private_symbols =
        requires_version(descriptor, size, sections, header->e_shnum, TFENC_PRIVATE_VERSION);
    for (unsigned i = 0; i < header->e_shnum; i++) {
        if (sections[i].sh_name >= names_bytes ||
            strcmp(names + sections[i].sh_name, DECLARATION_SECTION) != 0)
            continue;
        declaration = read_section(descriptor, size, sections, header->e_shnum, i,
                                   MAX_DECLARATION_BYTES, &length);
        if (declaration == NULL) {
            result = fail(why, why_size, "its section %s is malformed", DECLARATION_SECTION);
            goto done;
        }
        object->declares_types = 1;
        result = parse_declaration(declaration, length, object, why, why_size);
        break;
    }
done:
    free(declaration);
    free(names);
    free(sections);
    return result;
}

int tfenc_shared_object_examine(int descriptor, off_t size, tfenc_shared_object *object,
                                char *why, size_t why_size)
{
    memset(object, 0, sizeof *object);
    ElfW(Ehdr) header;
    /* The magic first, so that a short text file is called what it is. */
    unsigned char magic[SELFMAG];
    if (size >= SELFMAG && (read_at(descriptor, size, 0, magic, SELFMAG) != 0 ||
                            memcmp(magic, ELFMAG, SELFMAG) != 0))
        return fail(why, why_size, "not an ELF shared object (it does not start with \\177ELF)");
    if (size < (off_t)sizeof header)
        return fail(why, why_size, "%lld bytes: too short for an ELF header (empty or truncated)",
                    (long long)size);
    if (read_at(descriptor, size, 0, &header, sizeof header) != 0)
        return fail(why, why_size, "cannot read its ELF header");
    const int own_class = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
    if (header.e_ident[EI_CLASS] != own_class)
        return fail(why, why_size, "an ELF file of another word size (%d-bit; this tfenc is "
                    "%d-bit)", header.e_ident[EI_CLASS] == ELFCLASS64 ? 64 : 32,
                    own_class == ELFCLASS64 ? 64 : 32);
    const uint16_t probe = 1;
    const int own_data = *(const uint8_t *)&probe == 1 ? ELFDATA2LSB : ELFDATA2MSB;
    if (header.e_ident[EI_DATA] != own_data)
        return fail(why, why_size, "an ELF file of the other byte order");
    if (header.e_type != ET_DYN)
        return fail(why, why_size, "an ELF file but not a shared object (type %u; build it with "
                    "-shared -fPIC)", (unsigned)header.e_type);
    if (header.e_phentsize != sizeof(ElfW(Phdr)) || header.e_phnum == 0 ||
        header.e_phnum > MAX_PROGRAM_HEADERS)
        return fail(why, why_size, "its program header table is malformed");
    uint64_t program_bytes = (uint64_t)header.e_phnum * sizeof(ElfW(Phdr));
    if (!inside(header.e_phoff, program_bytes, size))
        return fail(why, why_size, "its program headers end at byte %llu but the file has only "
                    "%lld bytes (truncated copy?)",
                    (unsigned long long)(header.e_phoff + program_bytes), (long long)size);
    ElfW(Phdr) *programs = malloc((size_t)program_bytes);
    if (programs == NULL)
        return fail(why, why_size, "out of memory");
    if (read_at(descriptor, size, header.e_phoff, programs, (size_t)program_bytes) != 0) {
        free(programs);
        return fail(why, why_size, "cannot read its program headers");
    }
    int loads = 0, dynamic = 0, result = 0;
    for (unsigned i = 0; i < header.e_phnum && result == 0; i++) {
        const ElfW(Phdr) *segment = &programs[i];
        if (segment->p_type != PT_LOAD && segment->p_type != PT_DYNAMIC)
            continue;
        loads += segment->p_type == PT_LOAD;
        dynamic += segment->p_type == PT_DYNAMIC;
        /* The loader maps these bytes and reads them: past the end of the
         * file, the first touch is a SIGBUS. */
        if (!inside(segment->p_offset, segment->p_filesz, size))
            result = fail(why, why_size, "segment %u ends at byte %llu but the file has only "
                          "%lld bytes (truncated copy?)", i,
                          (unsigned long long)(segment->p_offset + segment->p_filesz),
                          (long long)size);
        else if (segment->p_type == PT_LOAD && segment->p_filesz > segment->p_memsz)
            result = fail(why, why_size, "segment %u is malformed (more file than memory bytes)",
                          i);
    }
    free(programs);
    if (result == 0 && (loads == 0 || dynamic == 0))
        result = fail(why, why_size, "an ELF file without %s: not a loadable shared object",
                      loads == 0 ? "loadable segments" : "a dynamic section");
    if (result == 0)
        result = examine_sections(descriptor, size, &header, object, why, why_size);
    if (result != 0)
        tfenc_shared_object_free(object);
    return result;
}

void tfenc_shared_object_free(tfenc_shared_object *object)
{
    for (int i = 0; i < object->n_types; i++)
        free(object->types[i]);
    free(object->types);
    memset(object, 0, sizeof *object);
}
