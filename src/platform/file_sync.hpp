// Writing a file's bytes through to the storage device. Linux's fsync and
// fdatasync do (the drive's write cache is flushed too); macOS's fsync only
// hands the data to the drive, which may keep it in its cache across a power
// loss: there F_FULLFSYNC is the call that does what Linux's fsync does
// (Apple's fsync(2) man page), at the price of a cache flush per call.
#pragma once

namespace trillion::platform {

// The file's data and metadata on the device (Linux: fsync; macOS:
// F_FULLFSYNC, or fsync where the filesystem refuses it). Also for a
// directory's descriptor, to make a rename in it durable. false with errno
// set on failure.
bool sync_file(int fd);

// The file's data, and only the metadata needed to read it back (Linux:
// fdatasync; macOS, which declares no fdatasync: as sync_file).
bool sync_file_data(int fd);

}  // namespace trillion::platform
