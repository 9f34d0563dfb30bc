/* altar — transport plumbing shared inside core/ (not installed). */
#ifndef ALTAR_CORE_TRANSPORT_INT_H
#define ALTAR_CORE_TRANSPORT_INT_H

#include "altar/plugin/transport.h"

/* The first required operation ops lacks ("(the vtable)" for NULL, "name"
 * for a table without one), or NULL when it has them all: what open and
 * registration (altar_transport_register, a plug-in host) refuse, by name. */
const char *altar__transport_missing(const altar_transport_ops_t *ops);

#endif
