// Files that hold secrets or private data: tokens, keys, the store.
//
// Least privilege on disk (docs/SECURITY.md): a secret file is readable by
// its owner only (no group or other bits), and a private folder is entered
// by its owner only (0700). These helpers read and make them so, and refuse
// what others could read or write, with a message that says how to fix it.
//
// Threading: plain functions; the file system is the only shared state.
#ifndef HF_CORE_PRIVATE_FILES_H_
#define HF_CORE_PRIVATE_FILES_H_

#include <string>

#include "core/status.h"

namespace hf {

// The contents of a secret file (a token), without the trailing newline.
// FailedPrecondition when group or others may read or write it ("chmod 600
// FILE"); NotFound when it cannot be opened; InvalidArgument when it is not a
// regular file, is empty, or is larger than 4 KiB.
Result<std::string> ReadSecretFile(const std::string& path);

// Writes `contents` to a new file at `path` with mode 0600 (created so, never
// readable by others for an instant); Unavailable on I/O errors.
Status WriteSecretFile(const std::string& path, const std::string& contents);

// Creates folder `path` (and parents) when missing, with mode 0700, and
// tightens an existing one that others may read or enter to 0700.
// FailedPrecondition, changing nothing, when it belongs to another user or
// others may write it (its files could have been replaced); Unavailable
// when it cannot be created.
Status MakePrivateDir(const std::string& path);

}  // namespace hf

#endif  // HF_CORE_PRIVATE_FILES_H_
