// The one event listener of a store (Store::SetListener), replaceable while
// events are being delivered on other threads.
//
// A delivery copies the listener under a lock and calls it without the lock
// (listeners are slow enough that holding the lock would serialize every
// writer). Set() therefore waits, after the swap, until every delivery that
// was already running has returned: when it returns, nothing can call the old
// listener any more, so its owner may destroy what the listener captured. (A
// PostgreSQL listen thread used to deliver an event to a JobManager that
// KlsServer::ReleaseState had already freed — ThreadSanitizer,
// heap-use-after-free.)
//
// Thread safety: every member may be called from any thread; Set() must not
// be called from inside a delivery (it would wait for itself).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "server/store/store.h"

namespace kls::store {

class ListenerSlot {
 public:
  using Listener = std::function<void(const StoreEvent&)>;

  /// Replaces the listener (empty = none) and waits for running deliveries.
  void Set(Listener listener) {
    std::unique_lock<std::mutex> lock(mu_);
    listener_ = std::move(listener);
    idle_.wait(lock, [&] { return in_flight_ == 0; });
  }

  /// Calls the listener, if any, with each event in order.
  void Deliver(const std::vector<StoreEvent>& events) {
    if (!events.empty()) WithListener([&](const Listener& l) { for (const StoreEvent& e : events) l(e); });
  }
  void Deliver(const StoreEvent& event) {
    WithListener([&](const Listener& l) { l(event); });
  }

 private:
  // Runs call(listener) outside the lock, counted as in flight; nothing when
  // there is no listener.
  template <typename Call>
  void WithListener(const Call& call) {
    Listener l;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!listener_) return;
      l = listener_;
      ++in_flight_;
    }
    call(l);
    std::lock_guard<std::mutex> lock(mu_);
    if (--in_flight_ == 0) idle_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ = 0;
  Listener listener_;
};

}  // namespace kls::store
