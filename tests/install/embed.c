/* A program that embeds altar through the installed headers and altar.pc:
 * reads a spec from JSON, prints its task key, the library's version and
 * where the library finds the modal bridge (tests/install/test_install.sh). */
#include <altar/codec.h>
#include <altar/modal.h>
#include <altar/spec.h>
#include <altar/version.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  if (strcmp(altar_version(), ALTAR_VERSION) != 0) {
    fprintf(stderr, "library %s, headers %s\n", altar_version(), ALTAR_VERSION);
    return 1;
  }
  const char *json = "{\"kind\": \"score\", \"image\": \"busybox\", \"command\": [\"true\"]}";
  altar_spec_t spec;
  altar_error_t err = {0};
  char key[ALTAR_TASK_KEY_LEN + 1];
  if (altar_spec_from_json(json, strlen(json), &spec, &err) != ALTAR_OK ||
      altar_spec_identity(&spec, key, &err) != ALTAR_OK) {
    fprintf(stderr, "spec: %s\n", err.msg);
    return 1;
  }
  altar_spec_clear(&spec);
  char bridge[4096];
  if (altar_modal_bridge_find(NULL, bridge, sizeof bridge, &err) != ALTAR_OK) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  printf("version %s\nkey %s\nbridge %s\n", altar_version(), key, bridge);
  return 0;
}
