/* test_core_dtypes.c — element types through the public API: sizes, NumPy and
 * MSL names, float-ness, and alloy_dtype_parse for every spelling a user may
 * write (NumPy, MLX `mx.` / `mlx.core.`, torch., MSL, short `f32`), plus the
 * error for unknown names, whose message must list the valid ones. The
 * expectations are an independent table written here, not the library's. */
#include "harness.h"

typedef struct {
    alloy_dtype dtype;
    size_t size;
    const char *name;
    const char *msl;
    int is_float;
} expect_row;

static const expect_row EXPECT[] = {
    {ALLOY_BOOL, 1, "bool", "bool", 0},
    {ALLOY_INT8, 1, "int8", "int8_t", 0},
    {ALLOY_UINT8, 1, "uint8", "uint8_t", 0},
    {ALLOY_INT16, 2, "int16", "int16_t", 0},
    {ALLOY_UINT16, 2, "uint16", "uint16_t", 0},
    {ALLOY_INT32, 4, "int32", "int32_t", 0},
    {ALLOY_UINT32, 4, "uint32", "uint32_t", 0},
    {ALLOY_INT64, 8, "int64", "int64_t", 0},
    {ALLOY_UINT64, 8, "uint64", "uint64_t", 0},
    {ALLOY_FLOAT16, 2, "float16", "float16_t", 1},
    {ALLOY_BFLOAT16, 2, "bfloat16", "bfloat16_t", 1},
    {ALLOY_FLOAT32, 4, "float32", "float", 1},
    {ALLOY_FLOAT64, 8, "float64", "double", 1},
};
#define N_EXPECT ((int)(sizeof EXPECT / sizeof EXPECT[0]))

static void test_table_is_complete(void) {
    CHECK(N_EXPECT == ALLOY_DTYPE_COUNT);
    for (int i = 0; i < N_EXPECT; i++) CHECK(EXPECT[i].dtype == (alloy_dtype)i);
}

static void test_sizes_names(void) {
    for (int i = 0; i < N_EXPECT; i++) {
        const expect_row *r = &EXPECT[i];
        CHECK_MSG(alloy_dtype_size(r->dtype) == r->size, "%s: size %zu", r->name,
                  alloy_dtype_size(r->dtype));
        CHECK_MSG(strcmp(alloy_dtype_name(r->dtype), r->name) == 0, "name %s",
                  alloy_dtype_name(r->dtype));
        CHECK_MSG(strcmp(alloy_dtype_msl_name(r->dtype), r->msl) == 0, "%s: msl %s", r->name,
                  alloy_dtype_msl_name(r->dtype));
        CHECK_MSG(!!alloy_dtype_is_float(r->dtype) == r->is_float, "%s is_float", r->name);
    }
}

static void test_invalid_dtype_values(void) {
    alloy_dtype bad[] = {ALLOY_DTYPE_COUNT, (alloy_dtype)(ALLOY_DTYPE_COUNT + 7), (alloy_dtype)-1};
    for (int i = 0; i < 3; i++) {
        CHECK(alloy_dtype_size(bad[i]) == 0);
        CHECK(alloy_dtype_name(bad[i]) != NULL);
        CHECK(alloy_dtype_msl_name(bad[i]) != NULL);
        CHECK(!alloy_dtype_is_float(bad[i]));
    }
}

/* Every canonical name must parse, with and without each module prefix. */
static void test_parse_canonical_with_prefixes(void) {
    static const char *const prefixes[] = {"", "mx.", "mlx.core.", "np.", "numpy.", "torch."};
    for (int i = 0; i < N_EXPECT; i++)
        for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s%s", prefixes[p], EXPECT[i].name);
            alloy_dtype d = ALLOY_DTYPE_COUNT;
            CHECK_OK(alloy_dtype_parse(buf, &d));
            CHECK_MSG(d == EXPECT[i].dtype, "'%s' parsed as %s", buf, alloy_dtype_name(d));
        }
}

static void test_parse_other_spellings(void) {
    static const struct { const char *spelling; alloy_dtype want; } CASES[] = {
        /* MSL names the body sees */
        {"int8_t", ALLOY_INT8}, {"uint8_t", ALLOY_UINT8}, {"int16_t", ALLOY_INT16},
        {"uint16_t", ALLOY_UINT16}, {"int32_t", ALLOY_INT32}, {"uint32_t", ALLOY_UINT32},
        {"int64_t", ALLOY_INT64}, {"uint64_t", ALLOY_UINT64}, {"float16_t", ALLOY_FLOAT16},
        {"bfloat16_t", ALLOY_BFLOAT16}, {"float", ALLOY_FLOAT32}, {"double", ALLOY_FLOAT64},
        {"half", ALLOY_FLOAT16}, {"bfloat", ALLOY_BFLOAT16}, {"char", ALLOY_INT8},
        {"uchar", ALLOY_UINT8}, {"short", ALLOY_INT16}, {"ushort", ALLOY_UINT16},
        {"int", ALLOY_INT32}, {"uint", ALLOY_UINT32}, {"long", ALLOY_INT64},
        {"ulong", ALLOY_UINT64},
        /* short forms */
        {"b1", ALLOY_BOOL}, {"i8", ALLOY_INT8}, {"u8", ALLOY_UINT8}, {"i16", ALLOY_INT16},
        {"u16", ALLOY_UINT16}, {"i32", ALLOY_INT32}, {"u32", ALLOY_UINT32},
        {"i64", ALLOY_INT64}, {"u64", ALLOY_UINT64}, {"f16", ALLOY_FLOAT16},
        {"bf16", ALLOY_BFLOAT16}, {"f32", ALLOY_FLOAT32}, {"f64", ALLOY_FLOAT64},
        /* NumPy's bool_ and prefixed MSL / short names */
        {"bool_", ALLOY_BOOL}, {"np.bool_", ALLOY_BOOL}, {"numpy.bool_", ALLOY_BOOL},
        {"torch.half", ALLOY_FLOAT16}, {"torch.float", ALLOY_FLOAT32},
        {"torch.double", ALLOY_FLOAT64}, {"torch.int", ALLOY_INT32}, {"torch.long", ALLOY_INT64},
        {"torch.short", ALLOY_INT16}, {"mx.f32", ALLOY_FLOAT32}, {"mlx.core.bfloat16", ALLOY_BFLOAT16},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        alloy_dtype d = ALLOY_DTYPE_COUNT;
        CHECK_OK(alloy_dtype_parse(CASES[i].spelling, &d));
        CHECK_MSG(d == CASES[i].want, "'%s' parsed as %s, wanted %s", CASES[i].spelling,
                  alloy_dtype_name(d), alloy_dtype_name(CASES[i].want));
    }
}

static void test_parse_unknown(void) {
    static const char *const BAD[] = {"", "float8", "Float32", "FLOAT32", "f33", "int128",
                                      "complex64", "mx.", "torch.", "float32 ", " float32",
                                      "mx.mx.float32", "jax.float32", "string", "float32\n"};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        alloy_dtype d = ALLOY_INT16;
        alloy_clear_error();
        CHECK_FAILS(alloy_dtype_parse(BAD[i], &d), ALLOY_ERROR_INVALID_ARGUMENT, "unknown dtype");
        CHECK_MSG(d == ALLOY_INT16, "'%s': out written on failure", BAD[i]);
        /* the message names what was given and lists every valid name */
        for (int k = 0; k < N_EXPECT; k++)
            CHECK_MSG(strstr(alloy_last_error(), EXPECT[k].name) != NULL,
                      "message for '%s' lacks '%s': %s", BAD[i], EXPECT[k].name, alloy_last_error());
    }
    CHECK_FAILS(alloy_dtype_parse("nonsense_type", &(alloy_dtype){0}), ALLOY_ERROR_INVALID_ARGUMENT,
                "nonsense_type");
    CHECK_FAILS(alloy_dtype_parse(NULL, &(alloy_dtype){0}), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_dtype_parse("float32", NULL), ALLOY_ERROR_INVALID_ARGUMENT, NULL);
}

/* name -> parse -> the same dtype, and msl name -> parse -> the same dtype. */
static void test_round_trip(void) {
    for (int i = 0; i < ALLOY_DTYPE_COUNT; i++) {
        alloy_dtype d = ALLOY_DTYPE_COUNT;
        CHECK_OK(alloy_dtype_parse(alloy_dtype_name((alloy_dtype)i), &d));
        CHECK(d == (alloy_dtype)i);
        d = ALLOY_DTYPE_COUNT;
        CHECK_OK(alloy_dtype_parse(alloy_dtype_msl_name((alloy_dtype)i), &d));
        CHECK(d == (alloy_dtype)i);
    }
}

int main(void) {
    RUN(test_table_is_complete);
    RUN(test_sizes_names);
    RUN(test_invalid_dtype_values);
    RUN(test_parse_canonical_with_prefixes);
    RUN(test_parse_other_spellings);
    RUN(test_parse_unknown);
    RUN(test_round_trip);
    return harness_finish();
}
