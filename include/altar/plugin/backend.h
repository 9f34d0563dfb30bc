/* altar — implementing an execution backend: what a plug-in needs beyond the user's
 * altar/backend.h. */
#ifndef ALTAR_PLUGIN_BACKEND_H
#define ALTAR_PLUGIN_BACKEND_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/backend.h"

ALTAR_API_END

#endif
