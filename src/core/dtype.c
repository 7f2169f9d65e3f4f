/* dtype.c — element type names, sizes and parsing. */
#include <string.h>

#include "alloy/dtype.h"
#include "error.h"

typedef struct {
    const char *name;     /* NumPy/MLX */
    const char *msl;      /* what the body sees */
    size_t size;
} dtype_info;

static const dtype_info INFO[ALLOY_DTYPE_COUNT] = {
    [ALLOY_BOOL] = {"bool", "bool", 1},
    [ALLOY_INT8] = {"int8", "int8_t", 1},
    [ALLOY_UINT8] = {"uint8", "uint8_t", 1},
    [ALLOY_INT16] = {"int16", "int16_t", 2},
    [ALLOY_UINT16] = {"uint16", "uint16_t", 2},
    [ALLOY_INT32] = {"int32", "int32_t", 4},
    [ALLOY_UINT32] = {"uint32", "uint32_t", 4},
    [ALLOY_INT64] = {"int64", "int64_t", 8},
    [ALLOY_UINT64] = {"uint64", "uint64_t", 8},
    [ALLOY_FLOAT16] = {"float16", "float16_t", 2},
    [ALLOY_BFLOAT16] = {"bfloat16", "bfloat16_t", 2},
    [ALLOY_FLOAT32] = {"float32", "float", 4},
    [ALLOY_FLOAT64] = {"float64", "double", 8},
};

static int valid(alloy_dtype d) { return (unsigned)d < ALLOY_DTYPE_COUNT; }

size_t alloy_dtype_size(alloy_dtype d) { return valid(d) ? INFO[d].size : 0; }
const char *alloy_dtype_name(alloy_dtype d) { return valid(d) ? INFO[d].name : "invalid"; }
const char *alloy_dtype_msl_name(alloy_dtype d) { return valid(d) ? INFO[d].msl : "invalid"; }

int alloy_dtype_is_float(alloy_dtype d) {
    return d == ALLOY_FLOAT16 || d == ALLOY_BFLOAT16 || d == ALLOY_FLOAT32 || d == ALLOY_FLOAT64;
}

static const struct { const char *alias; alloy_dtype dtype; } ALIASES[] = {
    {"b1", ALLOY_BOOL}, {"bool_", ALLOY_BOOL},
    {"i8", ALLOY_INT8}, {"char", ALLOY_INT8}, {"int8_t", ALLOY_INT8},
    {"u8", ALLOY_UINT8}, {"uchar", ALLOY_UINT8}, {"uint8_t", ALLOY_UINT8},
    {"i16", ALLOY_INT16}, {"short", ALLOY_INT16}, {"int16_t", ALLOY_INT16},
    {"u16", ALLOY_UINT16}, {"ushort", ALLOY_UINT16}, {"uint16_t", ALLOY_UINT16},
    {"i32", ALLOY_INT32}, {"int", ALLOY_INT32}, {"int32_t", ALLOY_INT32},
    {"u32", ALLOY_UINT32}, {"uint", ALLOY_UINT32}, {"uint32_t", ALLOY_UINT32},
    {"i64", ALLOY_INT64}, {"long", ALLOY_INT64}, {"int64_t", ALLOY_INT64},
    {"u64", ALLOY_UINT64}, {"ulong", ALLOY_UINT64}, {"uint64_t", ALLOY_UINT64},
    {"f16", ALLOY_FLOAT16}, {"half", ALLOY_FLOAT16}, {"float16_t", ALLOY_FLOAT16},
    {"bf16", ALLOY_BFLOAT16}, {"bfloat", ALLOY_BFLOAT16}, {"bfloat16_t", ALLOY_BFLOAT16},
    {"f32", ALLOY_FLOAT32}, {"float", ALLOY_FLOAT32},
    {"f64", ALLOY_FLOAT64}, {"double", ALLOY_FLOAT64},
};

alloy_status alloy_dtype_parse(const char *name, alloy_dtype *out) {
    if (!name || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "dtype name is NULL");
    const char *n = name;
    if (strncmp(n, "mlx.core.", 9) == 0) n += 9;
    else if (strncmp(n, "numpy.", 6) == 0) n += 6;
    else if (strncmp(n, "torch.", 6) == 0) n += 6;
    else if (strncmp(n, "mx.", 3) == 0) n += 3;
    else if (strncmp(n, "np.", 3) == 0) n += 3;
    for (int d = 0; d < ALLOY_DTYPE_COUNT; d++)
        if (strcmp(n, INFO[d].name) == 0) return (*out = (alloy_dtype)d), ALLOY_OK;
    for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
        if (strcmp(n, ALIASES[i].alias) == 0) return (*out = ALIASES[i].dtype), ALLOY_OK;
    return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                       "unknown dtype '%s': use one of bool, int8, uint8, int16, uint16, int32, "
                       "uint32, int64, uint64, float16, bfloat16, float32, float64",
                       name);
}
