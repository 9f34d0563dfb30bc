/* Fuzz target: what the object-storage adapters take from outside before
 * any request: gs:// and s3:// URIs (bucket and key rules, percent-encoding)
 * and the shared credentials file (INI profiles). The first byte picks. */
#include "fuzz_target.h"
#include "storage/cloud_int.h"
#include "storage/s3_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  altar_error_t err = {0};
  if (data[0] & 1) {
    altar_cloud_uri_t u;
    if (altar__cloud_uri_parse(text, (data[0] & 2) ? "s3" : "gs", (data[0] & 4) != 0, &u, &err) == 0) {
      altar_buf_t b = {0};
      altar__cloud_pct(&b, u.key, (data[0] & 8) != 0);
      altar_buf_free(&b);
      altar__cloud_uri_clear(&u);
    }
  } else {
    /* The credentials file, read from a memory file by path. */
    int fd = memfd_create("creds", MFD_CLOEXEC);
    if (fd >= 0 && write(fd, data + 1, size - 1) == (ssize_t)(size - 1)) {
      char path[64], profile[8] = "default";
      snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
      if (data[0] & 2) memcpy(profile, "work", 5);
      altar_strmap_t o = {0};
      altar_strmap_set(&o, "credentials_file", path);
      altar_strmap_set(&o, "profile", profile);
      altar_s3_creds_t c;
      if (altar__s3_creds_load(&o, &c, &err) == 0) altar__s3_creds_clear(&c);
      altar_strmap_clear(&o);
    }
    if (fd >= 0) close(fd);
  }
  free(text);
  return 0;
}
