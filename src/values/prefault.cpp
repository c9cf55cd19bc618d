// prefault.cpp — the collector's new heap memory faulted in on another core, ahead of the program.
//
// Fresh memory is dear on the machines we run on (VMs): the first write to each 4 KiB page traps
// to the kernel, which allocates and zeroes it, ~1.5-2 us a page, 0.4-0.5 ms a MiB. A reverse
// pass keeps its whole forward phase alive, so its heap only grows: W3's gradient at n = 10^6
// touches ~400 MiB of new pages, 0.2 s of its 0.55 s in the kernel.
//
// When the program grows the heap (the collector's heap-resize callback), a helper thread grows
// it further ahead of the program (GC_expand_hp: up to half the heap, at most 16 MiB, kept free
// ahead while the program keeps taking fresh memory, checked each millisecond), finds the new
// sections (the anonymous mappings /proc/self/maps shows anew) and faults them in
// (MADV_POPULATE_WRITE) on the other core, so that the program finds its pages ready. A range
// that appeared between two looks and is bigger than twice the heap's growth (a new evaluation
// stack, say) is not touched. The collection policy is unchanged: when to collect depends on
// what was allocated and what is live, not on the heap's size.
//
// The helper touches no value, so it is not registered with the collector (it only takes the
// collector's lock, to read sizes and to grow the heap). It runs only where there are two cores
// or more (on one, it would only move the work) and the kernel has MADV_POPULATE_WRITE (5.14);
// VLAD_PREFAULT=0 leaves it out.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <gc/gc.h>

#include "value.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace vlad {

namespace {

// The anonymous read-write private mappings of this process, sorted.
void anonymous_mappings(std::vector<Range>& out) {
  out.clear();
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  // (not a static array: the collector would scan its 64 KiB as roots at every collection)
  constexpr size_t kBuf = 1 << 16;
  static char* const buf = new char[kBuf];
  size_t have = 0;
  for (;;) {
    ssize_t n = read(fd, buf + have, kBuf - have - 1);
    if (n <= 0) break;
    have += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < have; i++) {
      if (buf[i] != '\n') continue;
      buf[i] = 0;
      const char* line = buf + start;
      start = i + 1;
      unsigned long lo, hi, off, ino;
      char perms[8], dev[16];
      int used = 0;
      if (sscanf(line, "%lx-%lx %7s %lx %15s %lu%n", &lo, &hi, perms, &off, dev, &ino, &used) < 6) continue;
      while (line[used] == ' ') used++;
      if (ino == 0 && line[used] == 0 && strcmp(perms, "rw-p") == 0) out.push_back({lo, hi});
    }
    memmove(buf, buf + start, have - start);
    have -= start;
  }
  close(fd);
  std::sort(out.begin(), out.end());
}

}  // namespace

// The parts of `now` not covered by `before` (both sorted, non-overlapping).
void uncovered_ranges(const std::vector<Range>& before, const std::vector<Range>& now, std::vector<Range>& out) {
  out.clear();
  size_t j = 0;
  for (Range r : now) {
    uintptr_t lo = r.first;
    while (j < before.size() && before[j].second <= lo) j++;
    for (size_t k = j; k < before.size() && before[k].first < r.second && lo < r.second; k++) {
      if (before[k].first > lo) out.push_back({lo, before[k].first});
      lo = std::max(lo, before[k].second);
    }
    if (lo < r.second) out.push_back({lo, r.second});
  }
}

namespace {

constexpr GC_word kAhead = 16u << 20;
// Populated 16 KiB at a time: the call holds the process's mmap lock (for reading) throughout,
// and the program's own mmap (the collector growing the heap, its scratch memory) waits for it
// to be free; at 1 MiB a step the program spent 0.15 s of W3's 0.55 s waiting so. 4 to 32 KiB
// measured alike.
constexpr uintptr_t kStep = 16u << 10;

struct Prefaulter {
  std::mutex mutex;
  std::condition_variable wake;
  GC_word heap_size = 0;  // the collector's latest, under mutex
  GC_on_heap_resize_proc host = nullptr;  // an embedding host's own callback, still called
};
Prefaulter* prefaulter = nullptr;  // (never freed: its thread waits on it until the process ends)

thread_local bool in_prefaulter = false;

void on_heap_resize(GC_word size) {  // (the collector's lock is held: no allocation here)
  if (prefaulter->host) prefaulter->host(size);
  if (in_prefaulter) return;  // its own growth ahead (below): it has the size
  {
    std::lock_guard<std::mutex> lock(prefaulter->mutex);
    prefaulter->heap_size = size;
  }
  prefaulter->wake.notify_one();
}

void prefault_main(GC_word start_size) {
  in_prefaulter = true;
  pthread_setname_np(pthread_self(), "vlad-prefault");
  Prefaulter* p = prefaulter;
  std::vector<Range> before, now, fresh;
  anonymous_mappings(before);
  GC_word seen = start_size;  // the heap's size when `before` was read
  GC_word last_free = 0;
  bool ahead = false;  // growing the heap ahead of the program, checking each millisecond
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(p->mutex);
      if (ahead) p->wake.wait_for(lock, std::chrono::milliseconds(1), [&] { return p->heap_size != seen; });
      else p->wake.wait(lock, [&] { return p->heap_size != seen; });
    }
    // The program is growing the heap (it grew it itself, or is using up what was grown ahead of
    // it): keep up to half the heap (at most kAhead) free and faulted in ahead of it.
    GC_word size = GC_get_heap_size(), free = GC_get_free_bytes();
    GC_word want = std::min<GC_word>(kAhead, size / 2);
    bool grew = size > seen;
    if (free < want && (grew || (ahead && free < last_free))) {
      if (GC_expand_hp(want - free)) size = GC_get_heap_size();
      ahead = true;
    } else if (ahead && free >= last_free) {
      ahead = false;  // the program is not taking fresh memory now
    }
    last_free = free;
    if (size == seen) continue;
    GC_word growth = size > seen ? size - seen : 0;
    seen = size;
    {
      std::lock_guard<std::mutex> lock(p->mutex);
      p->heap_size = std::max(p->heap_size, size);  // (the program's may be newer: a heap only grows)
    }
    anonymous_mappings(now);
    uncovered_ranges(before, now, fresh);
    std::swap(before, now);
    for (Range r : fresh) {
      if (growth == 0 || r.second - r.first > 2 * growth) continue;
      for (uintptr_t a = r.first; a < r.second; a += kStep)
        madvise((void*)a, std::min<uintptr_t>(kStep, r.second - a), MADV_POPULATE_WRITE);
    }
  }
}

}  // namespace

void start_prefaulter() {
  if (const char* e = getenv("VLAD_PREFAULT"))
    if (strcmp(e, "0") == 0) return;
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  // (MADV_POPULATE_WRITE is Linux 5.14's)
  void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return;
  bool populates = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(probe, 4096);
  if (!populates) return;
  prefaulter = new Prefaulter;
  prefaulter->host = GC_get_on_heap_resize();
  GC_word size = GC_get_heap_size();
  prefaulter->heap_size = size;
  // std::thread: libstdc++'s pthread_create, not the collector's, so the thread is not registered
  SigintBlocked quiet;
  std::thread(prefault_main, size).detach();
  GC_set_on_heap_resize(on_heap_resize);
}

SigintBlocked::SigintBlocked() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  pthread_sigmask(SIG_BLOCK, &s, &saved_);
}
SigintBlocked::~SigintBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

void populate_pages(void* p, size_t bytes) {
  uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
  if (hi > lo) madvise((void*)lo, hi - lo, MADV_POPULATE_WRITE);
}

}  // namespace vlad
