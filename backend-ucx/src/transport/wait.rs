//! Waiting for work: the worker's event fd, and sleeping on it.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// The worker's event fd, in blocking mode: readable when
    /// [`arm`](Transport::arm) said `Armed` and work has come.
    ///
    /// # Errors
    ///
    /// Busy-poll mode has none.
    pub fn event_fd(&self) -> Result<i32, Status> {
        self.worker.event_fd()
    }

    /// For waiters that are edge-triggered (tokio's `AsyncFd`), after
    /// [`arm`](Transport::arm) said `Armed`: takes what the event fd (an
    /// epoll set of UCX's) has ready, without waiting, and returns how
    /// many there were. The set keeps an entry ready until someone waits
    /// on it — `poll(2)` on the fd does, an edge-triggered waiter does
    /// not — and while one is kept, new work wakes nobody. Non-zero: work
    /// came since the last progress; poll before sleeping.
    ///
    /// # Errors
    ///
    /// Busy-poll mode (no event fd), or `epoll_wait(2)` failed other than
    /// by a signal.
    pub fn take_wakeups(&self) -> Result<usize, Status> {
        let fd = self.event_fd()?;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
        // SAFETY: events is a live array of 16 epoll_event for the call;
        // a zero timeout never blocks.
        let n = unsafe { libc::epoll_wait(fd, events.as_mut_ptr(), 16, 0) };
        if n >= 0 {
            return Ok(usize::try_from(n).unwrap_or(0));
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => Ok(1),
            _ => Err(Status(sys::UCS_ERR_IO_ERROR)),
        }
    }

    /// In blocking mode, after [`arm`](Transport::arm) said `Armed`:
    /// sleeps until the worker's event fd is readable or `timeout`
    /// passed. Returns whether it woke for work.
    ///
    /// # Errors
    ///
    /// Busy-poll mode (no event fd), or `poll(2)` failed other than by a
    /// signal.
    pub fn sleep(&self, timeout: Duration) -> Result<bool, Status> {
        sleep_any(&[self.event_fd()?], timeout)
    }
}

/// Sleeps until one of `fds` (transports' [`event_fd`](UcxTransport::event_fd)s,
/// each armed) is readable or `timeout` passed: one thread waiting on
/// several transports. Returns whether it woke for work.
///
/// # Errors
///
/// `poll(2)` failed other than by a signal.
pub fn sleep_any(fds: &[i32], timeout: Duration) -> Result<bool, Status> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_millis().max(1)).unwrap_or(i32::MAX);
    let n = pfds.len() as libc::nfds_t;
    // SAFETY: pfds is a live array of `n` pollfds for the call's duration.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), n, ms) };
    if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
        return Err(Status(sys::UCS_ERR_IO_ERROR));
    }
    Ok(r > 0)
}
