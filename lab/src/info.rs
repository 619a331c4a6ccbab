//! `iomsg info`: which UCX this is, the transports it offers here, and
//! iomsg's protocol version. The soak across hosts runs it on each host
//! and reads it back ([`crate::soak::remote::parse_info`]).

/// What `iomsg info` prints, in a build without UCX.
#[cfg(not(feature = "ucx"))]
pub fn text() -> String {
    format!(
        "iomsg {}\nprotocol version {}\nUCX: not in this build (cargo feature `ucx`); \
         transports: tcp, unix\n",
        env!("CARGO_PKG_VERSION"),
        iomsg_core::wire::VERSION,
    )
}

/// What `iomsg info` prints.
#[cfg(feature = "ucx")]
pub fn text() -> String {
    let v = iomsg_ucx::version::ucx_version();
    let mut text = format!(
        "iomsg {}\nprotocol version {}\nUCX {} loaded from {} (built against {})\n",
        env!("CARGO_PKG_VERSION"),
        iomsg_core::wire::VERSION,
        v.number(),
        v.library_path
            .as_ref()
            .map_or("an unknown file".into(), |p| p.display().to_string()),
        iomsg_ucx::version::BUILT_VERSION
    );
    match iomsg_ucx::resources::transports() {
        Ok(list) => {
            text.push_str(
                "transports UCX offers here (UCX_TLS and UCX_NET_DEVICES choose among them):\n",
            );
            for r in list {
                text.push_str(&format!(
                    "  {:<8} {:<12} ({})\n",
                    r.transport, r.device, r.component
                ));
            }
        }
        Err(e) => text.push_str(&format!("transports: cannot list them: {e}\n")),
    }
    text
}
