//! Socket addresses in the C layout UCX takes.

use core::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use iomsg_ucx_sys as sys;

/// A `sockaddr_in` or `sockaddr_in6`, stored where UCX can point at it.
pub(crate) struct SockAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl From<SocketAddr> for SockAddr {
    fn from(addr: SocketAddr) -> SockAddr {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(v4) => {
                // SAFETY: all-zero is a valid sockaddr_in.
                let mut sin: libc::sockaddr_in = unsafe { mem::zeroed() };
                sin.sin_family = libc::AF_INET as libc::sa_family_t;
                sin.sin_port = v4.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
                // SAFETY: sockaddr_storage is larger than and aligned for
                // sockaddr_in; the write stays within it.
                unsafe {
                    core::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin)
                };
                mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                // SAFETY: all-zero is a valid sockaddr_in6.
                let mut sin6: libc::sockaddr_in6 = unsafe { mem::zeroed() };
                sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sin6.sin6_port = v6.port().to_be();
                sin6.sin6_addr.s6_addr = v6.ip().octets();
                sin6.sin6_flowinfo = v6.flowinfo();
                sin6.sin6_scope_id = v6.scope_id();
                // SAFETY: as for sockaddr_in.
                unsafe {
                    core::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6)
                };
                mem::size_of::<libc::sockaddr_in6>()
            }
        };
        SockAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }
}

impl SockAddr {
    /// UCX's view of it; valid while `self` is.
    pub(crate) fn as_ucs(&self) -> sys::ucs_sock_addr_t {
        sys::ucs_sock_addr_t {
            addr: (&self.storage as *const libc::sockaddr_storage).cast(),
            addrlen: self.len as _,
        }
    }

    /// The address in a `sockaddr_storage` UCX filled in.
    pub(crate) fn from_storage(storage: &sys::sockaddr_storage) -> Option<SocketAddr> {
        // SAFETY: sys::sockaddr_storage and libc::sockaddr_storage are the
        // same C type (the system's), bound twice.
        let storage: &libc::sockaddr_storage =
            unsafe { &*(storage as *const sys::sockaddr_storage).cast() };
        match i32::from(storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin: &libc::sockaddr_in =
                    unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(sin.sin_port)))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let sin6: &libc::sockaddr_in6 =
                    unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Some(SocketAddr::new(
                    IpAddr::V6(ip),
                    u16::from_be(sin6.sin6_port),
                ))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_and_v6_addresses_round_trip_through_the_c_layout() {
        for addr in ["127.0.0.1:4433", "[::1]:9"] {
            let addr: SocketAddr = addr.parse().unwrap();
            let s = SockAddr::from(addr);
            // SAFETY: the two sockaddr_storage types are the same C type.
            let sys_storage: &sys::sockaddr_storage =
                unsafe { &*(&s.storage as *const libc::sockaddr_storage).cast() };
            assert_eq!(SockAddr::from_storage(sys_storage), Some(addr));
        }
    }
}
