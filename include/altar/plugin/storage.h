/* altar — implementing a storage adapter: what a plug-in needs beyond the user's
 * altar/storage.h. */
#ifndef ALTAR_PLUGIN_STORAGE_H
#define ALTAR_PLUGIN_STORAGE_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/storage.h"

ALTAR_API_END

#endif
