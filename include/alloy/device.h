/* alloy/device.h — devices and streams.
 *
 * Devices are owned by the library (never freed by the caller) and named
 * "cpu", "cuda", "cuda:N" or "auto" (the best available; the ALLOY_DEVICE
 * environment variable overrides what "auto" means). A stream is an in-order
 * queue of work on one device; every device has a default stream. */
#ifndef ALLOY_DEVICE_H
#define ALLOY_DEVICE_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct alloy_device alloy_device;
typedef struct alloy_stream alloy_stream;

typedef enum alloy_backend_kind {
    ALLOY_BACKEND_CPU = 0,
    ALLOY_BACKEND_CUDA = 1
} alloy_backend_kind;

/* name: "cpu", "cuda", "cuda:N", "auto" or NULL (= "auto"). An unavailable
 * device is ALLOY_ERROR_UNAVAILABLE with the reason in the message. */
alloy_status alloy_device_get(const char *name, alloy_device **out);

const char *alloy_device_name(const alloy_device *device);        /* "cpu", "cuda:0" */
const char *alloy_device_description(const alloy_device *device); /* human-readable */
alloy_backend_kind alloy_device_backend(const alloy_device *device);
/* A CUDA device's compute capability as major * 10 + minor (90: Hopper);
 * 0 for other devices. */
int alloy_device_compute_capability(const alloy_device *device);
/* A CUDA device's number of streaming multiprocessors (what a persistent
 * grid of one threadgroup per SM launches); 0 for other devices. */
int alloy_device_multiprocessor_count(const alloy_device *device);
/* 1 when kernels launched on the device may carry tensor maps
 * (alloy_launch_set_tensor_map): the CPU, and CUDA devices of compute
 * capability 9.0 or newer whose driver has cuTensorMapEncodeTiled. */
int alloy_device_has_tensor_maps(const alloy_device *device);
/* 1 when a launch that asks to overlap the previous kernel
 * (alloy_launch_set_overlap) does overlap on the device: CUDA devices of
 * compute capability 9.0 or newer with a CUDA 12.3 driver or newer, unless
 * ALLOY_CUDA_OVERLAP=0 (read when the device is first opened). Elsewhere
 * such a launch is an ordinary one and is compiled as one. */
int alloy_device_overlaps_launches(const alloy_device *device);

/* Waits until all work queued on every stream of the device has finished. */
alloy_status alloy_device_synchronize(alloy_device *device);

/* Backends known to this build, for `alloy info`: name ("cpu", "cuda"),
 * whether usable, and either a description or the reason it is unavailable. */
int alloy_backend_count(void);
alloy_status alloy_backend_info(int index, const char **name, int *available,
                                const char **detail);

/* Streams. The default stream is owned by the device; do not free it. */
alloy_status alloy_stream_default(alloy_device *device, alloy_stream **out);
alloy_status alloy_stream_new(alloy_device *device, alloy_stream **out);
alloy_status alloy_stream_synchronize(alloy_stream *stream);
alloy_device *alloy_stream_device(const alloy_stream *stream);
void alloy_stream_free(alloy_stream *stream); /* no-op on a default stream */

/* Wraps a stream created elsewhere: on CUDA a CUstream / cudaStream_t (for
 * example PyTorch's current stream); alloy never destroys it. NULL means the
 * device's legacy default stream. On the CPU any value gives an in-order
 * stream. The handle must be a live stream of this device's primary context
 * (a stream of another context is refused; a pointer that is not a stream
 * at all cannot be detected). Free the wrapper with alloy_stream_free. */
alloy_status alloy_stream_wrap(alloy_device *device, void *native, alloy_stream **out);

/* The backend's handle (CUstream on CUDA, NULL on the CPU). */
void *alloy_stream_native(const alloy_stream *stream);

/* Makes `waiter` wait, on the device and without blocking the host, until
 * the work queued on `signaller` so far has finished (an event). Both streams
 * must be on the same device. */
alloy_status alloy_stream_wait(alloy_stream *waiter, alloy_stream *signaller);

#ifdef __cplusplus
}
#endif
#endif
