/* The supervisor program (process_supervisor_main.c, linked on its own by
 * the build) carried inside the library, so the backend needs no file on
 * disk to exec it. Built without it, there is none and the backend forks
 * its supervisors instead. */
#include "process_int.h"

#ifdef ALTAR_SUPERVISOR_BIN
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".globl altar__proc_sup_blob\n"
        ".hidden altar__proc_sup_blob\n"
        "altar__proc_sup_blob:\n"
        ".incbin \"" ALTAR_SUPERVISOR_BIN "\"\n"
        ".globl altar__proc_sup_blob_end\n"
        ".hidden altar__proc_sup_blob_end\n"
        "altar__proc_sup_blob_end:\n"
        ".previous\n");
extern const unsigned char altar__proc_sup_blob[], altar__proc_sup_blob_end[];

const unsigned char *altar__proc_sup_program(size_t *plen) {
  *plen = (size_t)(altar__proc_sup_blob_end - altar__proc_sup_blob);
  return altar__proc_sup_blob;
}
#else
const unsigned char *altar__proc_sup_program(size_t *plen) {
  *plen = 0;
  return NULL;
}
#endif
