/* names.c — which names a kernel's inputs, outputs and template arguments may
 * take, and the table of MSL thread attributes.
 *
 * A name becomes a C++ variable in the generated kernel, next to the MSL
 * prelude, so it must be a plain identifier that neither the language, the
 * MSL dialect (types, address spaces, thread attributes, prelude constants)
 * nor alloy's own generated names already use. Messages say what is wrong and
 * what to do. */
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "dialect/rewrite.h"

/* ---- thread attributes --------------------------------------------------- */

static const struct {
    const char *name;
    int vector; /* uint3, else uint */
} attributes[] = {
    {"thread_position_in_grid", 1},
    {"thread_position_in_threadgroup", 1},
    {"threadgroup_position_in_grid", 1},
    {"threads_per_threadgroup", 1},
    {"dispatch_threads_per_threadgroup", 1},
    {"threads_per_grid", 1},
    {"grid_size", 1},
    {"grid_origin", 1},
    {"threadgroups_per_grid", 1},
    {"thread_index_in_threadgroup", 0},
    {"thread_index_in_simdgroup", 0},
    {"simdgroup_index_in_threadgroup", 0},
    {"simdgroups_per_threadgroup", 0},
    {"dispatch_simdgroups_per_threadgroup", 0},
    {"threads_per_simdgroup", 0},
    {"thread_execution_width", 0},
    {"thread_index_in_quadgroup", 0},
    {"quadgroup_index_in_threadgroup", 0},
    {"quadgroups_per_threadgroup", 0},
    {"dispatch_quadgroups_per_threadgroup", 0},
};
#define N_ATTRIBUTES ((int)(sizeof attributes / sizeof *attributes))

int alloy_attribute_count(void) { return N_ATTRIBUTES; }

const char *alloy_attribute_name(int index) {
    return index >= 0 && index < N_ATTRIBUTES ? attributes[index].name : NULL;
}

int alloy_attribute_is_vector(int index) {
    return index >= 0 && index < N_ATTRIBUTES ? attributes[index].vector : 0;
}

/* ---- reserved words ------------------------------------------------------ */

static const char *const cxx_keywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
    "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
    "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
    "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    /* C, and names the compilers treat specially */
    "restrict", "final", "override", "main", "NULL", "defined",
    NULL};

static const char *const msl_keywords[] = {
    "device", "constant", "threadgroup", "thread", "kernel", "vertex", "fragment", "visible",
    "stage_in", "threadgroup_imageblock", "ray_data", "object_data",
    NULL};

static const char *const msl_types[] = {
    "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "int16_t", "int32_t", "int64_t",
    "uint8_t", "uint16_t", "uint32_t", "uint64_t", "float16_t", "bfloat16_t", "float32_t",
    "float64_t", "atomic", "atomic_int", "atomic_uint", "atomic_float", "atomic_bool",
    "atomic_long", "atomic_ulong", "vec", "matrix", "packed_vec", "simdgroup_matrix",
    "sampler", "array", "array_ref", "Limits", "simdgroup_float8x8", "simdgroup_half8x8",
    "simdgroup_bfloat8x8", "imageblock",
    NULL};

/* Built-in functions a variable of the same name would hide. */
static const char *const msl_builtins[] = {
    "threadgroup_barrier", "simdgroup_barrier", "simdgroup_load", "simdgroup_store",
    "simdgroup_multiply", "simdgroup_multiply_accumulate", "make_filled_simdgroup_matrix",
    "as_type",
    NULL};

/* Constants the prelude defines as macros. */
static const char *const prelude_macros[] = {
    "INFINITY", "NAN", "MAXFLOAT", "HUGE_VALF", "HUGE_VALH", "HUGE_VAL", "FLT_MAX", "FLT_MIN",
    "FLT_EPSILON", "FLT_DIG", "FLT_MANT_DIG", "FLT_MAX_EXP", "FLT_MIN_EXP", "DBL_MAX", "DBL_MIN",
    "DBL_EPSILON", "HALF_MAX", "HALF_MIN", "HALF_EPSILON", "INT_MAX", "INT_MIN", "UINT_MAX",
    "LONG_MAX", "LONG_MIN", "ULONG_MAX", "SHRT_MAX", "CHAR_BIT", "M_PI_F", "M_PI_2_F",
    "M_PI_4_F", "M_1_PI_F", "M_2_PI_F", "M_E_F", "M_LN2_F", "M_LN10_F", "M_LOG2E_F",
    "M_LOG10E_F", "M_SQRT2_F", "M_SQRT1_2_F", "M_PI", "M_E",
    NULL};

/* Scalar MSL types; each also names vectors (float2 to float4), packed vectors
 * (packed_float2 to packed_float4) and matrices (float2x2 to float4x4). */
static const char *const msl_type_bases[] = {"bool", "char", "uchar", "short", "ushort", "int",
                                             "uint", "long", "ulong", "half", "bfloat", "float",
                                             "double", NULL};

/* ---- lookup -------------------------------------------------------------- */

/* alloy_check_identifier runs on every launch, for each template argument and
 * launch constant, so the lists above are hashed once into one table: a valid
 * name costs a hash and a probe or two instead of some 230 string comparisons. Each
 * name keeps the first list that has it, in the order the checks report. */

enum {
    NAME_FREE,
    NAME_MSL_TYPE,
    NAME_CXX_KEYWORD,
    NAME_MSL_KEYWORD,
    NAME_BUILTIN,
    NAME_ATTRIBUTE,
    NAME_MACRO
};

#define COUNT(a) (sizeof(a) / sizeof *(a))
/* per base: the scalar, 3 vectors, 9 matrices, 3 packed vectors */
#define N_DERIVED_TYPES ((COUNT(msl_type_bases) - 1) * 16)
#define N_NAMES                                                                                    \
    (COUNT(msl_types) + COUNT(cxx_keywords) + COUNT(msl_keywords) + COUNT(msl_builtins) +        \
     COUNT(prelude_macros) + N_ATTRIBUTES + N_DERIVED_TYPES)
#define TABLE_SIZE 1024 /* a power of two */
_Static_assert(N_NAMES * 2 <= TABLE_SIZE, "names.c: the name table is too full");

static struct {
    const char *name;
    unsigned char len, kind;
} table[TABLE_SIZE];
static char derived_types[N_DERIVED_TYPES][16]; /* "packed_bfloat4" is the longest */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* FNV-1a, one byte at a time (alloy_check_identifier hashes as it validates). */
#define HASH_START 2166136261u
#define HASH_STEP(h, c) (((h) ^ (unsigned char)(c)) * 16777619u)

static int table_find(const char *name, size_t len, uint32_t h) {
    for (uint32_t i = h & (TABLE_SIZE - 1);; i = (i + 1) & (TABLE_SIZE - 1)) {
        if (table[i].kind == NAME_FREE) return (int)i;
        if (table[i].len == len && memcmp(table[i].name, name, len) == 0) return (int)i;
    }
}

static void table_add(const char *name, int kind) {
    size_t len = strlen(name);
    uint32_t h = HASH_START;
    for (size_t i = 0; i < len; i++) h = HASH_STEP(h, name[i]);
    int i = table_find(name, len, h);
    if (table[i].kind != NAME_FREE) return; /* an earlier list has it */
    table[i].name = name;
    table[i].len = (unsigned char)len;
    table[i].kind = (unsigned char)kind;
}

static void table_add_list(const char *const *list, int kind) {
    for (; *list; list++) table_add(*list, kind);
}

static void add_derived_type(int *n, const char *prefix, const char *base, char n1, char n2) {
    char *d = derived_types[(*n)++];
    size_t pl = strlen(prefix), bl = strlen(base);
    memcpy(d, prefix, pl);
    memcpy(d + pl, base, bl);
    d += pl + bl;
    if (n1) *d++ = n1;
    if (n2) {
        *d++ = 'x';
        *d++ = n2;
    }
    *d = 0;
    table_add(derived_types[*n - 1], NAME_MSL_TYPE);
}

static void build_table(void) {
    table_add_list(msl_types, NAME_MSL_TYPE);
    int n = 0;
    for (int b = 0; msl_type_bases[b]; b++) {
        const char *base = msl_type_bases[b];
        add_derived_type(&n, "", base, 0, 0);
        for (char c = '2'; c <= '4'; c++) {
            add_derived_type(&n, "", base, c, 0);
            add_derived_type(&n, "packed_", base, c, 0);
            for (char r = '2'; r <= '4'; r++) add_derived_type(&n, "", base, c, r);
        }
    }
    table_add_list(cxx_keywords, NAME_CXX_KEYWORD);
    table_add_list(msl_keywords, NAME_MSL_KEYWORD);
    table_add_list(msl_builtins, NAME_BUILTIN);
    for (int i = 0; i < N_ATTRIBUTES; i++) table_add(attributes[i].name, NAME_ATTRIBUTE);
    table_add_list(prelude_macros, NAME_MACRO);
}

/* texture and depth types: texture2d, texturecube_array, texture_buffer, depth2d_ms */
static int is_texture_type(const char *name) {
    if (name[0] == 't')
        return strncmp(name, "texture", 7) == 0 &&
               ((name[7] >= '1' && name[7] <= '3') || strncmp(name + 7, "cube", 4) == 0 ||
                strcmp(name + 7, "_buffer") == 0);
    if (name[0] == 'd')
        return strncmp(name, "depth2d", 7) == 0 || strncmp(name, "depthcube", 9) == 0;
    return 0;
}

static int is_reserved(const char *name) {
    if (name[0] == '_' && (name[1] == '_' || (name[1] >= 'A' && name[1] <= 'Z'))) return 1;
    static const char prefix[] = "alloy_";
    for (int i = 0; prefix[i]; i++)
        if (tolower((unsigned char)name[i]) != prefix[i]) return 0;
    return 1;
}

alloy_status alloy_check_identifier(const char *name, const char *role) {
    if (!role) role = "kernel argument";
    if (!name || !*name)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s name is empty; give every %s a name",
                           role, role);
    size_t len = strlen(name);
    if (len > 255)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%.40s...' is %zu characters long; use at most 255", role, name,
                           len);
    uint32_t h = HASH_START;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        int ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "%s name '%s' is not a valid C identifier: use ASCII letters, "
                               "digits and '_', not starting with a digit",
                               role, name);
        h = HASH_STEP(h, c);
    }
    pthread_once(&table_once, build_table);
    int kind = table[table_find(name, len, h)].kind;
    if (kind == NAME_MSL_TYPE || is_texture_type(name))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is an MSL type name; choose another name", role, name);
    switch (kind) {
    case NAME_CXX_KEYWORD:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is a C++ keyword; choose another name", role, name);
    case NAME_MSL_KEYWORD:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is an MSL keyword; choose another name", role, name);
    case NAME_BUILTIN:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is an MSL built-in function; choose another name", role,
                           name);
    case NAME_ATTRIBUTE:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is an MSL thread attribute (alloy declares it when "
                           "the body uses it); choose another name",
                           role, name);
    case NAME_MACRO:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is a constant the MSL prelude defines; choose another "
                           "name",
                           role, name);
    default:
        break;
    }
    if (is_reserved(name))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is reserved: names starting with 'alloy_' (any case), "
                           "'__' or '_' and an uppercase letter belong to alloy and the "
                           "compiler; choose another name",
                           role, name);
    return ALLOY_OK;
}
