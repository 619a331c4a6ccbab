use super::*;

fn job(launcher: Launcher) -> RemoteJob {
    RemoteJob {
        launcher,
        server: "h0".into(),
        clients: vec!["h1".into(), "h2".into()],
        server_addr: None,
        port: 13337,
        dir: "/tmp/iomsg soak".into(),
        exe: None,
        ship: false,
        ssh_config: Some(PathBuf::from("/etc/cfg")),
        ssh_options: vec!["Port=2222".into()],
        slurm_job: Some("77".into()),
    }
}

fn argv(c: &Command) -> Vec<String> {
    std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn each_launcher_runs_the_script_on_the_host_named() {
    let j = job(Launcher::Ssh);
    let a = argv(&j.on("h1", "echo hi"));
    assert_eq!(a[0], "ssh");
    // Run by sh whatever the login shell.
    assert_eq!(&a[a.len() - 2..], ["h1", "sh -c 'echo hi'"]);
    for o in ["BatchMode=yes", "ServerAliveInterval=1", "Port=2222"] {
        assert!(a.windows(2).any(|w| w == ["-o", o]), "{o}: {a:?}");
    }
    assert!(a.windows(2).any(|w| w == ["-F", "/etc/cfg"]));

    let j = job(Launcher::Pdsh);
    let c = j.on("h2", "echo hi");
    let a = argv(&c);
    assert_eq!(
        a,
        [
            "pdsh",
            "-N",
            "-S",
            "-R",
            "ssh",
            "-w",
            "h2",
            "sh -c 'echo hi'"
        ]
    );
    let env: Vec<_> = c.get_envs().collect();
    let (_, v) = env
        .iter()
        .find(|(k, _)| *k == "PDSH_SSH_ARGS_APPEND")
        .expect("ssh options for pdsh");
    let v = v.unwrap().to_string_lossy();
    assert!(
        v.contains("-o BatchMode=yes") && v.contains("-F /etc/cfg") && v.contains("-o Port=2222")
    );

    let j = job(Launcher::Slurm);
    let a = argv(&j.on("node7", "echo hi"));
    assert_eq!(
        a,
        [
            "srun",
            "--jobid=77",
            "--overlap",
            "-N1",
            "-n1",
            "--unbuffered",
            "--quiet",
            "--nodelist=node7",
            "sh",
            "-c",
            "echo hi"
        ]
    );
}

/// `script` run by sh as a launcher would run it here: its stdin the
/// soak's pipe, its stdout read by the test.
fn under_sh(script: &str) -> std::process::Child {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn the_wrapper_quotes_everything_and_reports_pid_and_exit() {
    let j = job(Launcher::Ssh);
    let w = j.wrapper(
        &[("UCX_TLS".into(), "tcp".into())],
        &["/opt/it's/iomsg".into(), "server".into(), "a b".into()],
    );
    assert!(
        w.starts_with("exec 3<&0; mkdir -p '/tmp/iomsg soak' && cd '/tmp/iomsg soak' && {"),
        "{w}"
    );
    assert!(
        w.contains(r"env UCX_TLS=tcp '/opt/it'\''s/iomsg' server 'a b' </dev/null 3<&- &"),
        "{w}"
    );
    assert!(w.contains("echo iomsg-remote-pid $p; "), "{w}");
    assert!(w.contains("echo iomsg-remote-exit $s; }"), "{w}");
    // What sh makes of it: the wrapper's lines around the program's;
    // over ssh with the soak's pipe held open, the program runs to its
    // end.
    for launcher in [Launcher::Ssh, Launcher::Pdsh] {
        let script = job(launcher)
            .wrapper(
                &[],
                &[
                    "sh".into(),
                    "-c".into(),
                    "echo ran; sleep 0.3; exit 3".into(),
                ],
            )
            .replace("'/tmp/iomsg soak'", "/tmp");
        let mut child = under_sh(&script);
        let held = child.stdin.take();
        let out = child.wait_with_output().unwrap();
        drop(held);
        let text = String::from_utf8_lossy(&out.stdout);
        let w = wrapped(&text);
        assert!(w.pid.is_some_and(|p| p > 1), "{text}");
        assert_eq!(w.exit, Some(exit_of_status(3)), "{launcher:?}: {text}");
        assert!(text.contains("ran"));
    }
}

#[test]
fn over_ssh_the_process_dies_with_the_soaks_pipe() {
    let script = job(Launcher::Ssh)
        .wrapper(&[], &["sleep".into(), "30".into()])
        .replace("'/tmp/iomsg soak'", "/tmp");
    let started = std::time::Instant::now();
    let mut child = under_sh(&script);
    use std::io::BufRead as _;
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let pid = wrapped(&first).pid.unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // While the soak holds its end, the process lives.
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} gone early"
    );
    // The soak is gone: its end of the pipe closes.
    drop(child.stdin.take());
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut rest);
    let _ = child.wait();
    let w = wrapped(&rest);
    assert_eq!(w.exit.and_then(|e| e.signal), Some(9), "{rest}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} still there"
    );
}

#[test]
fn wrapper_lines_are_read_through_a_host_prefix_and_signals_decoded() {
    let w = wrapped("h1: iomsg-remote-pid 4242\nh1: listening on x\nh1: iomsg-remote-exit 137\n");
    assert_eq!(w.pid, Some(4242));
    let e = w.exit.unwrap();
    assert_eq!((e.code, e.signal), (None, Some(9)));
    assert_eq!(exit_of_status(0).code, Some(0));
    assert_eq!(exit_of_status(1).code, Some(1));
    assert_eq!(exit_of_status(143).signal, Some(15));
    assert_eq!(wrapped("no lines here\n"), Wrapped::default());
    // No exit line: the host or the link to it was lost.
    assert_eq!(wrapped("iomsg-remote-pid 7\nstatus acked=3\n").exit, None);
}

#[test]
fn hosts_files_name_one_server_and_clients() {
    let (s, c) = parse_hosts_file("# lab\nserver a\nclient b\nclient c # two\n\n").unwrap();
    assert_eq!(
        (s.as_str(), c),
        ("a", vec!["b".to_string(), "c".to_string()])
    );
    assert!(parse_hosts_file("client b\n")
        .unwrap_err()
        .contains("server"));
    assert!(parse_hosts_file("server a\n")
        .unwrap_err()
        .contains("client"));
    assert!(parse_hosts_file("server a\nserver b\nclient c\n").is_err());
    assert!(parse_hosts_file("server a\nclient b c\n").is_err());
    assert!(parse_hosts_file("server a\nworker b\n").is_err());
    assert!(parse_hosts_file("server a\nclient -oProxyCommand=x\n").is_err());
    assert!(check_host("a,b").is_err() && check_host("h;rm").is_err());
    // pdsh host lists and globs would name several hosts.
    for h in ["h[1-2]", "h^x", "h*", "h?"] {
        assert!(check_host(h).is_err(), "{h}");
    }
    assert!(check_host("root@node-1.example").is_ok());
}

#[test]
fn client_slots_go_round_the_client_hosts_and_hosts_are_listed_once() {
    let mut j = job(Launcher::Ssh);
    assert_eq!(
        (0..5).map(|k| j.client_host(k)).collect::<Vec<_>>(),
        ["h1", "h2", "h1", "h2", "h1"]
    );
    j.clients = vec!["h1".into(), "h0".into(), "h1".into()];
    assert_eq!(j.hosts(), ["h0", "h1"]);
}

#[cfg(feature = "ucx")]
#[test]
fn what_iomsg_info_prints_here_is_read_back() {
    let (version, transports) = parse_info(&crate::info::text());
    assert_eq!(version, iomsg_ucx::version::ucx_version().number());
    assert!(transports.iter().any(|t| t == "tcp/lo"), "{transports:?}");
}

#[test]
fn info_and_ucx_endpoint_lines_are_read() {
    let info = "iomsg 0.1.0\nprotocol version 1\nUCX 1.13.1 loaded from /lib/libucp.so.0 (built against 1.13.1)\ntransports UCX offers here (UCX_TLS and UCX_NET_DEVICES choose among them):\n  tcp      eth0         (tcp)\n  tcp      lo           (tcp)\n";
    let (v, t) = parse_info(info);
    assert_eq!(v, "1.13.1");
    assert_eq!(t, ["tcp/eth0", "tcp/lo"]);
    assert!(transports_used("a line with tag(x) but no ep_cfg\n").is_empty());
    let out = "listening on 0.0.0.0:1\n[1.2] [vm:1 :0] ucp_worker.c:1763 UCX  INFO  ep_cfg[1]: tag(tcp/veth0) stream(tcp/veth0)\n[1.3] [vm:1 :0] ucp_worker.c:1763 UCX  INFO  ep_cfg[2]: tag(rc_mlx5/mlx5_0:1 tcp/veth0)\n";
    assert_eq!(
        transports_used(out),
        [
            "tag(tcp/veth0)",
            "stream(tcp/veth0)",
            "tag(rc_mlx5/mlx5_0:1 tcp/veth0)"
        ]
    );
}

#[test]
fn quoting_survives_sh() {
    for s in ["plain", "a b", "it's", "$HOME", "`x`", "", "a\"b", "*"] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote(s)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), s);
    }
}

#[test]
fn a_signal_reaches_the_process_named_and_no_other() {
    // A process whose command line names `--audit-name server-1`.
    // (bash waits in its `read` builtin: no child is left behind.)
    let mut child = Command::new("bash")
        .args(["-c", "read -t 30 x", "bash", "--audit-name", "server-1"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let run = |name: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(signal_script(pid, name, "KILL"))
            .output()
            .unwrap()
    };
    // Not it: a longer name, another name, a name with a regex dot.
    for other in ["server-10", "server-", "client-1", "server.1"] {
        let out = run(other);
        assert_eq!(out.status.code(), Some(3), "{other}");
        assert!(child.try_wait().unwrap().is_none(), "{other} killed it");
    }
    let out = run("server-1");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("VmHWM"));
    let st = wait_bounded(&mut child, Duration::from_secs(5)).unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(st.signal(), Some(9));
    // Gone now: refused, not an error anyone else pays for.
    assert_eq!(run("server-1").status.code(), Some(3));
}
