/* cuda_api.h — the few CUDA driver and NVRTC declarations the backend uses,
 * written out by hand: alloy builds without a CUDA toolkit and loads
 * libcuda.so.1 and libnvrtc at run time (cuda_loader.c).
 *
 * Handle types reuse the driver's struct tag names so the function pointer
 * types below are exactly those of cuda.h; the numeric constants are copied
 * from cuda.h / nvrtc.h (CUDA 13.0; these values are ABI and never change).
 * Defining ALLOY_CUDA_TYPES_DEFINED before including this file skips the
 * basic typedefs, so a scratch program can include the real cuda.h first and
 * check every function pointer type against it. */
#ifndef ALLOY_CUDA_API_H
#define ALLOY_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#ifndef ALLOY_CUDA_TYPES_DEFINED
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef int CUjit_option;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;
typedef struct CUtensorMap_st CUtensorMap; /* 128 bytes, 64-byte aligned */
typedef int CUtensorMapDataType;
typedef int CUtensorMapInterleave;
typedef int CUtensorMapSwizzle;
typedef int CUtensorMapL2promotion;
typedef int CUtensorMapFloatOOBfill;
/* cuLaunchKernelEx's configuration (CUDA 12): an attribute is its id, padding
 * to 8 bytes and a 64-byte union of values; the config lists them. */
typedef int CUlaunchAttributeID;
typedef union CUlaunchAttributeValue_union {
    char pad[64];
    int programmaticStreamSerializationAllowed;
} CUlaunchAttributeValue;
typedef struct CUlaunchAttribute_st {
    CUlaunchAttributeID id;
    char pad[8 - sizeof(CUlaunchAttributeID)];
    CUlaunchAttributeValue value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
#endif

/* CUresult values */
#define ALLOY_CUDA_SUCCESS 0
#define ALLOY_CUDA_ERROR_OUT_OF_MEMORY 2
#define ALLOY_CUDA_ERROR_NO_DEVICE 100
#define ALLOY_CUDA_ERROR_INVALID_IMAGE 200
#define ALLOY_CUDA_ERROR_NO_BINARY_FOR_GPU 209
#define ALLOY_CUDA_ERROR_INVALID_PTX 218
#define ALLOY_CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define ALLOY_CUDA_ERROR_NOT_READY 600
#define ALLOY_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701

/* CUdevice_attribute values */
#define ALLOY_CU_DEV_MAX_THREADS_PER_BLOCK 1
#define ALLOY_CU_DEV_MAX_BLOCK_DIM_X 2
#define ALLOY_CU_DEV_MAX_BLOCK_DIM_Y 3
#define ALLOY_CU_DEV_MAX_BLOCK_DIM_Z 4
#define ALLOY_CU_DEV_MAX_GRID_DIM_X 5
#define ALLOY_CU_DEV_MAX_GRID_DIM_Y 6
#define ALLOY_CU_DEV_MAX_GRID_DIM_Z 7
#define ALLOY_CU_DEV_MAX_SHARED_MEMORY_PER_BLOCK 8
#define ALLOY_CU_DEV_MULTIPROCESSOR_COUNT 16
#define ALLOY_CU_DEV_COMPUTE_CAPABILITY_MAJOR 75
#define ALLOY_CU_DEV_COMPUTE_CAPABILITY_MINOR 76
#define ALLOY_CU_DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97

/* CUfunction_attribute values */
#define ALLOY_CU_FUNC_MAX_THREADS_PER_BLOCK 0
#define ALLOY_CU_FUNC_SHARED_SIZE_BYTES 1
#define ALLOY_CU_FUNC_CONST_SIZE_BYTES 2
#define ALLOY_CU_FUNC_LOCAL_SIZE_BYTES 3
#define ALLOY_CU_FUNC_NUM_REGS 4
#define ALLOY_CU_FUNC_PTX_VERSION 5
#define ALLOY_CU_FUNC_BINARY_VERSION 6
#define ALLOY_CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* CUjit_option values */
#define ALLOY_CU_JIT_ERROR_LOG_BUFFER 5
#define ALLOY_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

/* Tensor maps (cuTensorMapEncodeTiled): the values used */
#define ALLOY_CU_TENSOR_MAP_BYTES 128
#define ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT8 0
#define ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT16 1
#define ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT32 2
#define ALLOY_CU_TENSOR_MAP_DATA_TYPE_UINT64 4
#define ALLOY_CU_TENSOR_MAP_INTERLEAVE_NONE 0
#define ALLOY_CU_TENSOR_MAP_SWIZZLE_NONE 0
#define ALLOY_CU_TENSOR_MAP_SWIZZLE_32B 1
#define ALLOY_CU_TENSOR_MAP_SWIZZLE_64B 2
#define ALLOY_CU_TENSOR_MAP_SWIZZLE_128B 3
#define ALLOY_CU_TENSOR_MAP_L2_PROMOTION_L2_256B 3
#define ALLOY_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE 0

/* CUlaunchAttributeID: the launch may overlap the stream's previous kernel */
#define ALLOY_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6

/* Flags */
#define ALLOY_CU_STREAM_NON_BLOCKING 0x1u
#define ALLOY_CU_EVENT_DISABLE_TIMING 0x2u

/* nvrtcResult values */
#define ALLOY_NVRTC_SUCCESS 0
#define ALLOY_NVRTC_ERROR_COMPILATION 6

/* ---- driver entry points (names as exported by libcuda.so.1) ------------- */

typedef struct alloy_cuda_driver {
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuGetErrorName)(CUresult error, const char **str);
    CUresult (*cuGetErrorString)(CUresult error, const char **str);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *pi, CUdevice_attribute attrib, CUdevice dev);
    CUresult (*cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *pctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetCurrent)(CUcontext *pctx);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *dptr, size_t bytesize);
    CUresult (*cuMemFree_v2)(CUdeviceptr dptr);
    CUresult (*cuMemGetInfo_v2)(size_t *free, size_t *total);
    CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void *src, size_t bytes,
                                     CUstream stream);
    CUresult (*cuMemcpyDtoHAsync_v2)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                     CUstream stream);
    CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char uc, size_t n, CUstream stream);
    CUresult (*cuMemsetD16Async)(CUdeviceptr dst, unsigned short us, size_t n, CUstream stream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned int ui, size_t n, CUstream stream);
    CUresult (*cuMemsetD2D32Async)(CUdeviceptr dst, size_t pitch, unsigned int ui, size_t width,
                                   size_t height, CUstream stream);
    CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
    CUresult (*cuStreamDestroy_v2)(CUstream stream);
    CUresult (*cuStreamSynchronize)(CUstream stream);
    CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
    CUresult (*cuStreamGetCtx)(CUstream stream, CUcontext *pctx); /* optional */
    CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
    CUresult (*cuEventRecord)(CUevent event, CUstream stream);
    CUresult (*cuEventQuery)(CUevent event);
    CUresult (*cuEventSynchronize)(CUevent event);
    CUresult (*cuEventDestroy_v2)(CUevent event);
    CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image, unsigned int n_options,
                                   CUjit_option *options, void **option_values);
    CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule module, const char *name);
    CUresult (*cuFuncGetAttribute)(int *pi, CUfunction_attribute attrib, CUfunction fn);
    CUresult (*cuFuncSetAttribute)(CUfunction fn, CUfunction_attribute attrib, int value);
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                               unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                               unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                               void **params, void **extra);
    /* optional (CUDA 12 drivers and newer): only overlapping launches need it */
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *config, CUfunction f, void **params, void **extra);
    /* optional (CUDA 12 drivers and newer): only tensor maps need it */
    CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                       cuuint32_t tensorRank, void *globalAddress,
                                       const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                                       const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                                       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                       CUtensorMapL2promotion l2Promotion,
                                       CUtensorMapFloatOOBfill oobFill);
} alloy_cuda_driver;

typedef struct alloy_nvrtc {
    const char *(*nvrtcGetErrorString)(nvrtcResult result);
    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    nvrtcResult (*nvrtcGetNumSupportedArchs)(int *n);  /* optional (NVRTC >= 11.2) */
    nvrtcResult (*nvrtcGetSupportedArchs)(int *archs); /* optional */
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name,
                                      int n_headers, const char *const *headers,
                                      const char *const *include_names);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int n_options,
                                       const char *const *options);
    nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char *ptx);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *size); /* optional */
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);       /* optional */
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
} alloy_nvrtc;

/* The loaded driver, valid once alloy_cuda_load_driver returned 0. */
extern alloy_cuda_driver alloy_cu;
/* The loaded NVRTC, valid once alloy_cuda_load_nvrtc returned 0. */
extern alloy_nvrtc alloy_nvrtc_api;

/* Loads libcuda.so.1 once and calls cuInit(0); 0 on success, otherwise -1
 * with the reason (for `alloy info`) in why. Thread-safe; the result is
 * remembered. */
int alloy_cuda_load_driver(char *why, size_t why_len);

/* Loads NVRTC once (see cuda_loader.c for where it looks); 0 on success,
 * otherwise -1 with every place tried in why. Needs no driver. */
int alloy_cuda_load_nvrtc(char *why, size_t why_len);

/* NVRTC's version (major*1000 + minor*10, like the driver's), 0 if absent. */
int alloy_cuda_nvrtc_version(void);
/* The directory with the CUDA headers that go with the NVRTC found (where
 * cuda_fp16.h lives), or NULL. Passed to NVRTC as -I. */
const char *alloy_cuda_include_dir(void);
/* Where NVRTC was loaded from ("" if not loaded). */
const char *alloy_cuda_nvrtc_path(void);

/* "CUDA_ERROR_X (description)" for a driver result, static storage or the
 * caller's buffer. */
const char *alloy_cuda_error_text(CUresult r, char *buf, size_t len);

#endif
