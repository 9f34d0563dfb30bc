/* The clocks (altar/clock.h). */
#include "altar/clock.h"

#include <time.h>

static struct timespec read_clock(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts;
}

int64_t altar_mono_ms(void) {
  struct timespec ts = read_clock(CLOCK_MONOTONIC);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double altar_mono_s(void) {
  struct timespec ts = read_clock(CLOCK_MONOTONIC);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t altar_wall_ms(void) {
  struct timespec ts = read_clock(CLOCK_REALTIME);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double altar_wall_s(void) {
  struct timespec ts = read_clock(CLOCK_REALTIME);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
