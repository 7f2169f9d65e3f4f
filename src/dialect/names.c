/* names.c — which names a kernel's inputs, outputs and template arguments may
 * take, and the table of MSL thread attributes.
 *
 * A name becomes a C++ variable in the generated kernel, next to the MSL
 * prelude, so it must be a plain identifier that neither the language, the
 * MSL dialect (types, address spaces, thread attributes, prelude constants)
 * nor alloy's own generated names already use. Messages say what is wrong and
 * what to do. */
#include <ctype.h>
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

static int in_list(const char *name, const char *const *list) {
    for (; *list; list++)
        if (strcmp(name, *list) == 0) return 1;
    return 0;
}

/* MSL scalar, vector, packed vector, matrix and simdgroup matrix names. */
static int is_msl_type(const char *name) {
    static const char *const bases[] = {"bool", "char", "uchar", "short", "ushort", "int",
                                        "uint", "long", "ulong", "half", "bfloat", "float",
                                        "double", NULL};
    if (in_list(name, msl_types)) return 1;
    const char *p = name;
    int packed = 0;
    if (strncmp(p, "packed_", 7) == 0) {
        p += 7;
        packed = 1;
    }
    for (int i = 0; bases[i]; i++) {
        size_t bl = strlen(bases[i]);
        if (strncmp(p, bases[i], bl) != 0) continue;
        const char *s = p + bl;
        if (*s == 0) return !packed;
        if (s[0] >= '2' && s[0] <= '4' && s[1] == 0) return 1;
        if (!packed && s[0] >= '2' && s[0] <= '4' && s[1] == 'x' && s[2] >= '2' && s[2] <= '4' &&
            s[3] == 0)
            return 1; /* float2x3 */
    }
    /* texture and depth types: texture2d, texturecube_array, texture_buffer, depth2d_ms */
    if (strncmp(name, "texture", 7) == 0 &&
        ((name[7] >= '1' && name[7] <= '3') || strncmp(name + 7, "cube", 4) == 0 ||
         strcmp(name + 7, "_buffer") == 0))
        return 1;
    if (strncmp(name, "depth2d", 7) == 0 || strncmp(name, "depthcube", 9) == 0) return 1;
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
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        int ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "%s name '%s' is not a valid C identifier: use ASCII letters, "
                               "digits and '_', not starting with a digit",
                               role, name);
    }
    if (is_msl_type(name))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is an MSL type name; choose another name", role, name);
    if (in_list(name, cxx_keywords))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is a C++ keyword; choose another name", role, name);
    if (in_list(name, msl_keywords))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is an MSL keyword; choose another name", role, name);
    if (in_list(name, msl_builtins))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is an MSL built-in function; choose another name", role,
                           name);
    for (int i = 0; i < N_ATTRIBUTES; i++)
        if (strcmp(name, attributes[i].name) == 0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "%s name '%s' is an MSL thread attribute (alloy declares it when "
                               "the body uses it); choose another name",
                               role, name);
    if (in_list(name, prelude_macros))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is a constant the MSL prelude defines; choose another "
                           "name",
                           role, name);
    if (is_reserved(name))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s name '%s' is reserved: names starting with 'alloy_' (any case), "
                           "'__' or '_' and an uppercase letter belong to alloy and the "
                           "compiler; choose another name",
                           role, name);
    return ALLOY_OK;
}
