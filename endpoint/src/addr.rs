//! Addresses as the application gives them: [`ToAddr`] turns text, a
//! [`SocketAddr`] or a backend's own address type into the address a
//! backend takes, and [`AddrError`] names the input and the forms it
//! may take when that fails.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// Why an address given does not name one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrError {
    /// What was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
    /// The forms the backend takes (`"HOST:PORT (127.0.0.1:7000)"`).
    pub expected: &'static str,
}

impl fmt::Display for AddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad address {:?}: {}; write {}",
            self.input, self.reason, self.expected
        )
    }
}

impl std::error::Error for AddrError {}

/// An address type that parses from text.
pub trait ParseAddr: Sized {
    /// The forms it parses from, for errors.
    const FORMS: &'static str;

    /// The address `text` names.
    ///
    /// # Errors
    ///
    /// It names none: the error says why, with the input and [`Self::FORMS`].
    fn parse_addr(text: &str) -> Result<Self, AddrError>;
}

impl ParseAddr for SocketAddr {
    const FORMS: &'static str =
        "HOST:PORT, such as 127.0.0.1:13337, [::1]:13337 or localhost:13337";

    fn parse_addr(text: &str) -> Result<SocketAddr, AddrError> {
        let fail = |reason: String| AddrError {
            input: text.to_owned(),
            reason,
            expected: Self::FORMS,
        };
        if let Ok(addr) = text.parse() {
            return Ok(addr);
        }
        text.to_socket_addrs()
            .map_err(|e| fail(e.to_string()))?
            .next()
            .ok_or_else(|| fail("the name resolved to no address".into()))
    }
}

/// What `connect` and `bind` take as an address of type `A`: text that
/// parses as one, a [`SocketAddr`] (for any `A` built from one), or `A`
/// itself where the backend says so.
pub trait ToAddr<A> {
    /// The address.
    ///
    /// # Errors
    ///
    /// The text does not parse or resolve (see [`ParseAddr`]).
    fn to_addr(&self) -> Result<A, AddrError>;
}

impl<A: ParseAddr> ToAddr<A> for str {
    fn to_addr(&self) -> Result<A, AddrError> {
        A::parse_addr(self)
    }
}

impl<A: ParseAddr> ToAddr<A> for String {
    fn to_addr(&self) -> Result<A, AddrError> {
        A::parse_addr(self)
    }
}

impl<A: From<SocketAddr>> ToAddr<A> for SocketAddr {
    fn to_addr(&self) -> Result<A, AddrError> {
        Ok(A::from(*self))
    }
}

impl<A, T: ToAddr<A> + ?Sized> ToAddr<A> for &T {
    fn to_addr(&self) -> Result<A, AddrError> {
        (**self).to_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_socket_addresses_become_socket_addresses() {
        let a: SocketAddr = "127.0.0.1:7000".to_addr().unwrap();
        assert_eq!(a.port(), 7000);
        let b: SocketAddr = a.to_addr().unwrap();
        assert_eq!(a, b);
        let c: SocketAddr = String::from("localhost:7001").to_addr().unwrap();
        assert_eq!(c.port(), 7001);
    }

    #[test]
    fn a_bad_address_names_the_input_and_the_forms() {
        let e = ToAddr::<SocketAddr>::to_addr("127.0.0.1:99999").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("\"127.0.0.1:99999\""), "{text}");
        assert!(text.contains("HOST:PORT"), "{text}");
        let e = ToAddr::<SocketAddr>::to_addr("no port").unwrap_err();
        assert_eq!(e.input, "no port");
    }
}
