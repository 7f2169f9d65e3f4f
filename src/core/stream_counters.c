/* stream_counters.c — each stream's zeroed counters (stream_counters.h).
 *
 * One array a stream, not a device: kernels on two streams may run at the same
 * time, and two of them counting in the same words would miscount. Zeroing it
 * once and having its users leave it zero costs nothing a launch; a fill a
 * launch would be a second operation on the queue, what the counters are there
 * to save. A larger array replaces the old one, which is freed at once: the
 * allocator hands its memory out again only after the work queued on it. */
#include <pthread.h>

#include "array_internal.h"
#include "error.h"
#include "stream_counters.h"

/* Streams are used from any thread; the lookup and growth are rare and short. */
static pthread_mutex_t counters_lock = PTHREAD_MUTEX_INITIALIZER;

alloy_status alloy_stream_counters(alloy_device *dev, alloy_stream *stream, int64_t words, alloy_array **out) {
    if (!dev || !out || words < 0) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "stream counters: bad arguments");
    alloy_stream *s = stream ? stream : dev->default_stream;
    if (s->device != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "stream counters: the stream is on %s, not %s",
                           s->device->name, dev->name);
    alloy_status st = ALLOY_OK;
    pthread_mutex_lock(&counters_lock);
    const int64_t have = s->counters ? alloy_array_size(s->counters) : 0;
    if (have < words || !s->counters) {
        /* room to grow by half again, at least a page's worth */
        int64_t n = words + words / 2;
        if (n < 1024) n = 1024;
        alloy_array *a = NULL;
        st = alloy_array_new(dev, ALLOY_UINT32, 1, &n, &a);
        if (st == ALLOY_OK) st = alloy_array_fill_on(a, 0, s);
        if (st == ALLOY_OK) {
            alloy_array_free(s->counters);
            s->counters = a;
        } else {
            alloy_array_free(a);
        }
    }
    if (st == ALLOY_OK) *out = alloy_array_retain(s->counters);
    pthread_mutex_unlock(&counters_lock);
    return st;
}

void alloy_stream_counters_release(alloy_stream *s) {
    if (!s) return;
    pthread_mutex_lock(&counters_lock);
    alloy_array_free(s->counters);
    s->counters = NULL;
    pthread_mutex_unlock(&counters_lock);
}
