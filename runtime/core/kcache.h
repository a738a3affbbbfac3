/* kcache.h - a content-addressed disk cache for compiled images (NVRTC CUBIN
 * and PTX, the CPU backend's shared objects).
 *
 * Directory: $DPC_CACHE_DIR, else $XDG_CACHE_HOME/dpc, else $HOME/.cache/dpc,
 * created 0700 on first write. It must belong to the user and be writable by
 * nobody else (a cached .so is loaded and run): a directory that is not is
 * refused (puts fail, gets miss).
 *
 * Each entry is one file, <key>.<kind>: the payload as compiled, then a
 * footer (length, checksum, key, kind, arch, creation time, magic). Keeping
 * the payload at offset 0 lets a cached shared object be dlopen'ed in place
 * (ELF ignores trailing bytes). Entries are written atomically; a truncated,
 * corrupted or mislabelled entry is a miss, is removed, and the next put
 * replaces it. Safe to use from several threads and processes at once. */
#ifndef DPC_KCACHE_H
#define DPC_KCACHE_H

#include "base.h"

/* Entries larger than this are refused (put) or ignored (get). */
#define DPC_KCACHE_MAX_ENTRY ((size_t)1 << 30)

/* The cache directory as resolved from the environment now; false when it
 * cannot be (no HOME) or does not fit in n. */
bool dpc_kcache_dir(char *out, size_t n);

/* key = SHA-256 (64 lowercase hex digits + NUL) over every input that changes
 * the image: kind ("cubin", "ptx", "cpu-so"), arch ("sm_90", "x86_64"),
 * toolchain ("nvrtc 13.0", "gcc 12.2.0"), options (the full option string),
 * the source, and dpc's own version. Each field is length-prefixed, so no two
 * different inputs collide by concatenation. */
void dpc_kcache_key(const char *kind, const char *arch, const char *toolchain,
                    const char *options, const void *source, size_t source_len, char key[65]);

/* Looks the entry <key>.<kind> up. On a hit, replaces out's contents with the
 * payload (NUL-terminated; len excludes the NUL) and returns true. A missing,
 * unreadable or corrupt entry is a miss (corrupt ones are removed). */
bool dpc_kcache_get(const char *key, const char *kind, dpc_buf *out);

/* Stores data as <key>.<kind>, atomically. kind is [a-z0-9-]{1,31}, arch
 * (recorded for dpc_kcache_list) [A-Za-z0-9_.-]{0,31}. */
dpc_status dpc_kcache_put(const char *key, const char *kind, const char *arch, const void *data,
                          size_t len, dpc_err *e);

/* For entries used by path (dlopen of a cached shared object): checks the
 * entry as dpc_kcache_get does and gives its path; false on a miss. */
bool dpc_kcache_path(const char *key, const char *kind, char *path, size_t n);

/* A refused cache directory (not a directory, another owner, writable by
 * group or others) is noted, never printed: the run goes on, compiling
 * what it would have loaded. The note is the caller's: a model pushes its
 * own around the compiles it makes (dpc_model.kcache, reported by the C
 * API as the program's warning), so one program's refusal is never
 * another's; without one pushed, the calling thread's own. set: a refusal
 * was noted, msg its first. */
typedef struct dpc_kcache_note {
    bool set;
    char msg[DPC_ERR_MSG];
} dpc_kcache_note;
/* Refusals on this thread go to n until the pop; returns the note before. */
dpc_kcache_note *dpc_kcache_note_push(dpc_kcache_note *n);
/* Back to prev (dpc_kcache_note_push's result). A refusal noted in the note
 * popped is passed up to prev (or the thread's own note) when that has
 * none, so that a caller asking its thread (the CLI) still hears it. */
void dpc_kcache_note_pop(dpc_kcache_note *prev);
/* The calling thread's own note: true with its message the first time a
 * refusal is there, false every other time. The CLI says it once on
 * stderr. */
bool dpc_kcache_refusal(char *msg, size_t n);

/* Appends one line per entry, sorted by key:
 *     <key> <size> <kind> <arch> <age>       (age: 42s, 7m, 3h, 12d)
 * with "corrupt" in place of kind/arch/age for an entry that fails its
 * footer check. A missing cache directory lists nothing. */
dpc_status dpc_kcache_list(dpc_buf *report, dpc_err *e);

/* Removes every entry (and leftover temporary files of interrupted writes),
 * leaving the directory and anything else in it; *removed counts files. */
dpc_status dpc_kcache_clear(long *removed, dpc_err *e);

#endif
