/* The tb5 transport as the BTL glue (C, compiled against Open MPI's internal
 * headers) sees it: one handle per process bundling a backend Link, fault
 * injection, the reliability Engine and the heartbeat thread. C++ behind a C
 * interface because Open MPI's internal headers are C only. */
#ifndef TRILLION_TB5_API_H
#define TRILLION_TB5_API_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tb5_options {
  const char* backend;       /* "udp", "verbs" or "auto" (verbs if a device opens, else udp) */
  const char* if_include;    /* udp: interface names, IPv4 addresses or subnets, comma-separated ("" = every
                                non-loopback interface) */
  const char* verbs_library; /* "" = librdma.dylib (macOS) / libibverbs.so.1 (Linux) */
  const char* verbs_device;  /* device names, comma-separated ("" = every device with an active port) */
  unsigned mtu;              /* largest frame in bytes (0: 65507 udp, 4096 verbs; verbs: at most the device's) */
  unsigned window;           /* frames in flight per peer, 1..64 (0: 64; udp: what the receive buffer holds;
                                verbs: at most 24) */
  double rto, rto_max, heartbeat, peer_timeout; /* seconds */
  double loss, duplicate, reorder;              /* injected, probabilities per frame */
  unsigned long long seed;
  /* Added with one device per peer (zero-initialised fields keep the defaults). */
  const char* verbs_gid_index; /* NULL or "" = each device's IPv4-mapped GID; else that index on every device */
  unsigned local_peers;        /* testing: reach ranks on this host through tb5 too (else btl/self's and sm's) */
  unsigned initial_seq;        /* testing: first sequence number (every rank alike) */
  unsigned payload_hash;       /* frame checksums cover payloads: 0 unless the link checks them (udp), 1 always, 2 never */
};

struct tb5_piece {
  const void* data;
  size_t len;
};

struct tb5_stats {
  uint64_t messages_sent, messages_delivered, frames_sent, retransmissions, acks_sent;
  uint64_t duplicates_dropped, out_of_window, bad_frames, reordered;
  uint64_t injected_lost, injected_duplicated, injected_reordered;
  /* What the verbs simulator (libtb5_verbs_sim.so, when it is the verbs
   * library) did to this process's frames: its tb5_sim_counter. 0 elsewhere. */
  uint64_t sim_lost, sim_duplicated, sim_reordered, sim_stalls;
  uint64_t puts_placed; /* puts (ob1's RDMA protocol) whose bytes this process received into place */
};

typedef struct tb5_handle tb5_handle;
typedef void (*tb5_deliver_fn)(void* ctx, uint32_t peer, uint8_t tag, const void* data, size_t len);
/* detail: what the engine knows of the peer (frames heard, owed), for the log. */
typedef void (*tb5_dead_fn)(void* ctx, uint32_t peer, double silent_seconds, const char* detail);

/* NULL on failure with the reason in err (e.g. "no RDMA device"). */
tb5_handle* tb5_open(const struct tb5_options* o, uint32_t self, uint32_t nranks, tb5_deliver_fn deliver,
                     tb5_dead_fn dead, void* ctx, char* err, size_t errlen);
/* Bytes of this process's address (for the modex: its host, and every
 * device or interface with its IPv4 subnet); 0 if cap is too small. */
size_t tb5_address(tb5_handle* h, void* buf, size_t cap);
/* 0: connected through the device (verbs) or interface (udp) on the cable
 * to the peer; 1: not through tb5 — the peer is on this host, left to
 * btl/self and sm (unless local_peers), or was refused by an earlier call;
 * -1 with err set: no device reaches it (naming both hosts), or its address
 * is malformed or of another backend. */
int tb5_connect(tb5_handle* h, uint32_t peer, const void* addr, size_t len, char* err, size_t errlen);
/* 0, or -1 with err set (a fatal protocol error). */
int tb5_send(tb5_handle* h, uint32_t peer, uint8_t tag, const struct tb5_piece* pieces, size_t n, char* err,
             size_t errlen);
/* The same without copying: the pieces (at most 2) stay untouched until
 * the sent callback returns `cookie` (from tb5_progress, once every frame is
 * acknowledged). 0: borrowed; 1: copied instead, the pieces are free now;
 * -1 with err set. */
int tb5_send_borrowed(tb5_handle* h, uint32_t peer, uint8_t tag, const struct tb5_piece* pieces, size_t n,
                      void* cookie, char* err, size_t errlen);
/* Writes len bytes at data into the peer's memory at remote_addr (an
 * address in the peer's process: the BTL's emulated RDMA put). data stays
 * untouched until the sent callback returns cookie, which says the bytes are
 * in place at the peer. 0: under way; 1: the peer is gone, nothing sent;
 * -1 with err set. */
int tb5_put(tb5_handle* h, uint32_t peer, uint64_t remote_addr, const void* data, size_t len, void* cookie,
            char* err, size_t errlen);
typedef void (*tb5_sent_fn)(void* ctx, void* cookie);
void tb5_set_sent_callback(tb5_handle* h, tb5_sent_fn sent, void* ctx);
/* Events handled (>= 0), or -1 with err set. */
int tb5_progress(tb5_handle* h, char* err, size_t errlen);
/* 1 if every message was acknowledged within timeout seconds. */
int tb5_flush(tb5_handle* h, double timeout);
/* Says bye, stops the heartbeat thread, frees everything. */
void tb5_close(tb5_handle* h);
const char* tb5_describe(tb5_handle* h);
const char* tb5_backend(tb5_handle* h); /* "udp" or "verbs" */
void tb5_get_stats(tb5_handle* h, struct tb5_stats* s);

#ifdef __cplusplus
}
#endif
#endif
