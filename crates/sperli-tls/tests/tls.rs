//! TLS over real sockets on 127.0.0.1 (protocol §2.1, §2.2): our two sides,
//! the refusals, and interop with Debian's
//! `openssl s_client` / `s_server`. Every socket has timeouts, every child
//! process a deadline, so nothing can hang.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime};

use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sperli_tls::config::{self, PrivatePemDir};
use sperli_tls::pki::{expected_cn, JobCa, RankCertParams, RankIdentity, SubjectAltName};
use sperli_wire::error::{AuthError, TlsFailure};
use sperli_wire::{Error, HCode, JobId};

const IO_TIMEOUT: Duration = Duration::from_secs(5);
const JOB: JobId = JobId([0x5a; 16]);

fn deadline() -> SystemTime {
    SystemTime::now() + Duration::from_secs(3600)
}

fn timeouts(s: &TcpStream) {
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
}

fn listen() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// Accepts one connection on `l`, waiting at most [`IO_TIMEOUT`] for it
/// (the accept runs on a thread of its own and reports on a channel).
fn accept_one(l: &TcpListener) -> TcpStream {
    let l = l.try_clone().unwrap();
    l.set_nonblocking(false).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(l.accept());
    });
    let (s, _) = rx
        .recv_timeout(IO_TIMEOUT)
        .expect("no connection came")
        .unwrap_or_else(|e| panic!("accept: {e}"));
    timeouts(&s);
    s
}

fn dial(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    timeouts(&s);
    s
}

fn tls_err(e: &Error) -> Option<TlsFailure> {
    match e {
        Error::Authentication {
            error: AuthError::Tls(f),
            ..
        } => Some(*f),
        _ => None,
    }
}

/// Outcome of one server/client pair: the server side's result (after its
/// echo) and the client side's result (after the exchange).
struct Outcome {
    server: Result<(), Error>,
    client: Result<(), Error>,
}

/// Rank 0 (client, `client_id`) dials rank 1 (server, `server_id`) at host
/// entry `host`; the server expects rank 0, the client expects rank 1.
/// On success they exchange bytes in both directions.
fn run_pair(
    server_id: &RankIdentity,
    client: Arc<ClientConfig>,
    host: &str,
    server_expects: u32,
    client_expects: u32,
) -> Outcome {
    let (l, addr) = listen();
    let server_cfg = config::server_config_from_pem(
        server_id.ca_cert_pem.as_bytes(),
        server_id.cert_pem.as_bytes(),
        server_id.key_pem().as_bytes(),
    )
    .unwrap();
    let server = thread::spawn(move || -> Result<(), Error> {
        let sock = accept_one(&l);
        let mut s = config::accept(server_cfg, sock, &JOB, server_expects)?;
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf)
            .map_err(|e| Error::io("server read", &e))?;
        assert_eq!(&buf, b"hello");
        s.write_all(b"world")
            .map_err(|e| Error::io("server write", &e))?;
        s.flush().map_err(|e| Error::io("server flush", &e))?;
        s.conn.send_close_notify();
        let _ = s.flush();
        Ok(())
    });
    let host = host.to_owned();
    let client = thread::spawn(move || -> Result<(), Error> {
        let sock = dial(addr);
        let mut s = config::connect(client, sock, &host, &JOB, client_expects)?;
        s.write_all(b"hello")
            .map_err(|e| Error::io("client write", &e))?;
        s.flush().map_err(|e| Error::io("client flush", &e))?;
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf)
            .map_err(|e| Error::io("client read", &e))?;
        assert_eq!(&buf, b"world");
        Ok(())
    });
    Outcome {
        server: server.join().expect("server thread"),
        client: client.join().expect("client thread"),
    }
}

fn client_cfg(id: &RankIdentity) -> Arc<ClientConfig> {
    config::client_config_from_pem(
        id.ca_cert_pem.as_bytes(),
        id.cert_pem.as_bytes(),
        id.key_pem().as_bytes(),
    )
    .unwrap()
}

fn roots(ca_pem: &str) -> RootCertStore {
    let mut r = RootCertStore::empty();
    r.add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    r
}

mod pairs {
    use super::*;

    #[test]
    fn correct_pair_handshakes_and_exchanges_bytes_ipv4() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r0 = ca.issue_rank(0, "127.0.0.1").unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let o = run_pair(&r1, client_cfg(&r0), "127.0.0.1", 0, 1);
        o.server.unwrap();
        o.client.unwrap();
    }

    #[test]
    fn correct_pair_over_pem_dir_with_dns_host() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r0 = ca.issue_rank(0, "node-0.example").unwrap();
        let r1 = ca.issue_rank(1, "node-1.example").unwrap();
        let dir0 = PrivatePemDir::create(&r0).unwrap();
        let o = run_pair(&r1, dir0.client_config().unwrap(), "node-1.example", 0, 1);
        o.server.unwrap();
        o.client.unwrap();
    }

    #[test]
    fn tls12_only_client_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r0 = ca.issue_rank(0, "127.0.0.1").unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let cfg = ClientConfig::builder_with_provider(config::provider())
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .with_root_certificates(roots(&r0.ca_cert_pem))
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(r0.cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(r0.key_pem().as_bytes()).unwrap(),
            )
            .unwrap();
        let o = run_pair(&r1, Arc::new(cfg), "127.0.0.1", 0, 1);
        let se = o.server.unwrap_err();
        assert_eq!(se.h_code(), Some(HCode::H1611));
        assert_eq!(tls_err(&se), Some(TlsFailure::ProtocolVersion), "{se}");
        assert!(o.client.is_err());
    }

    #[test]
    fn client_without_certificate_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let cfg = ClientConfig::builder_with_provider(config::provider())
            .with_protocol_versions(config::VERSIONS)
            .unwrap()
            .with_root_certificates(roots(&r1.ca_cert_pem))
            .with_no_client_auth();
        let o = run_pair(&r1, Arc::new(cfg), "127.0.0.1", 0, 1);
        let se = o.server.unwrap_err();
        assert_eq!(tls_err(&se), Some(TlsFailure::NoCertificate), "{se}");
        assert!(o.client.is_err());
    }

    #[test]
    fn client_certificate_from_another_jobs_ca_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let other = JobCa::generate(JOB, deadline()).unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let mut r0 = other.issue_rank(0, "127.0.0.1").unwrap();
        // The client trusts our CA (so the server cert passes); only its own
        // certificate is foreign.
        r0.ca_cert_pem = r1.ca_cert_pem.clone();
        let o = run_pair(&r1, client_cfg(&r0), "127.0.0.1", 0, 1);
        let se = o.server.unwrap_err();
        assert_eq!(tls_err(&se), Some(TlsFailure::UnknownIssuer), "{se}");
        assert!(o.client.is_err());
    }

    #[test]
    fn server_certificate_from_another_jobs_ca_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let other = JobCa::generate(JOB, deadline()).unwrap();
        let r0 = ca.issue_rank(0, "127.0.0.1").unwrap();
        let mut r1 = other.issue_rank(1, "127.0.0.1").unwrap();
        r1.ca_cert_pem = r0.ca_cert_pem.clone();
        let o = run_pair(&r1, client_cfg(&r0), "127.0.0.1", 0, 1);
        let ce = o.client.unwrap_err();
        assert_eq!(tls_err(&ce), Some(TlsFailure::UnknownIssuer), "{ce}");
        assert!(o.server.is_err());
    }

    #[test]
    fn wrong_cn_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let r0 = ca
            .issue(&RankCertParams {
                common_name: format!("sperli-{}-zero", JOB.to_hex()),
                san: SubjectAltName::Ip([127, 0, 0, 1].into()),
            })
            .unwrap();
        let o = run_pair(&r1, client_cfg(&r0), "127.0.0.1", 0, 1);
        match o.server.unwrap_err() {
            Error::Authentication {
                peer: Some(0),
                error: AuthError::Subject { expected, got },
            } => {
                assert_eq!(expected, expected_cn(&JOB, 0));
                assert!(got.ends_with("-zero"));
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn another_jobs_cn_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let r0 = ca
            .issue(&RankCertParams {
                common_name: expected_cn(&JobId([0x11; 16]), 0),
                san: SubjectAltName::Ip([127, 0, 0, 1].into()),
            })
            .unwrap();
        let o = run_pair(&r1, client_cfg(&r0), "127.0.0.1", 0, 1);
        let se = o.server.unwrap_err();
        assert!(
            matches!(
                se,
                Error::Authentication {
                    error: AuthError::Subject { .. },
                    ..
                }
            ),
            "{se}"
        );
    }

    #[test]
    fn right_cn_for_the_wrong_rank_is_refused_by_server() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let r2 = ca.issue_rank(2, "127.0.0.1").unwrap();
        let o = run_pair(&r1, client_cfg(&r2), "127.0.0.1", 0, 1);
        match o.server.unwrap_err() {
            Error::Authentication {
                error: AuthError::Subject { expected, got },
                ..
            } => {
                assert_eq!(expected, expected_cn(&JOB, 0));
                assert_eq!(got, expected_cn(&JOB, 2));
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn right_cn_for_the_wrong_rank_is_refused_by_client() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r0 = ca.issue_rank(0, "127.0.0.1").unwrap();
        let r2 = ca.issue_rank(2, "127.0.0.1").unwrap();
        // Rank 0 dials the host of rank 1, but rank 2 answers.
        let o = run_pair(&r2, client_cfg(&r0), "127.0.0.1", 0, 1);
        match o.client.unwrap_err() {
            Error::Authentication {
                peer: Some(1),
                error: AuthError::Subject { got, .. },
            } => assert_eq!(got, expected_cn(&JOB, 2)),
            e => panic!("{e}"),
        }
    }

    #[test]
    fn san_not_matching_the_dialled_host_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r0 = ca.issue_rank(0, "node-0.example").unwrap();
        let r1 = ca.issue_rank(1, "node-2.example").unwrap();
        let o = run_pair(&r1, client_cfg(&r0), "node-1.example", 0, 1);
        let ce = o.client.unwrap_err();
        assert_eq!(tls_err(&ce), Some(TlsFailure::NameMismatch), "{ce}");
        // And an IPv4 SAN of another address.
        let r1 = ca.issue_rank(1, "127.0.0.2").unwrap();
        let o = run_pair(&r1, client_cfg(&r0), "127.0.0.1", 0, 1);
        assert_eq!(
            tls_err(&o.client.unwrap_err()),
            Some(TlsFailure::NameMismatch)
        );
    }

    #[test]
    fn ipv4_host_held_as_dns_name_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r0 = ca.issue_rank(0, "127.0.0.1").unwrap();
        let r1 = ca
            .issue(&RankCertParams {
                common_name: expected_cn(&JOB, 1),
                san: SubjectAltName::Dns("127.0.0.1".into()),
            })
            .unwrap();
        let o = run_pair(&r1, client_cfg(&r0), "127.0.0.1", 0, 1);
        let ce = o.client.unwrap_err();
        assert_eq!(tls_err(&ce), Some(TlsFailure::NameMismatch), "{ce}");
    }

    #[test]
    fn garbage_instead_of_tls_is_refused() {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        let r1 = ca.issue_rank(1, "127.0.0.1").unwrap();
        let (l, addr) = listen();
        let cfg = config::server_config_from_pem(
            r1.ca_cert_pem.as_bytes(),
            r1.cert_pem.as_bytes(),
            r1.key_pem().as_bytes(),
        )
        .unwrap();
        let server = thread::spawn(move || config::accept(cfg, accept_one(&l), &JOB, 0).err());
        let mut c = dial(addr);
        c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        drop(c);
        let e = server.join().unwrap().expect("must fail");
        assert_eq!(e.h_code(), Some(HCode::H1611));
    }
}

mod openssl {
    //! Interop with Debian's openssl binary (installed by CI's script).
    use super::*;
    use std::process::{Child, Command, Output, Stdio};

    fn openssl() -> &'static str {
        let ok = Command::new("openssl")
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            ok,
            "the `openssl` binary is missing: the interop tests need it \
             (CI installs it with `apt-get install -y openssl`)"
        );
        "openssl"
    }

    /// Waits for a child's exit at most `limit`, killing it after that.
    fn wait_bounded(child: Child, limit: Duration) -> Output {
        let pid = child.id().to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(limit) {
            Ok(out) => out,
            Err(_) => {
                let _ = Command::new("kill").args(["-9", &pid]).status();
                rx.recv().expect("the waiting thread reports")
            }
        };
        out.expect("child output")
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// Dials `port` once `server` (openssl s_server) says it listens: it
    /// prints `ACCEPT` on its stdout then. The rest of its stdout is read
    /// and dropped, so the pipe never fills.
    fn dial_when_listening(server: &mut Child, port: u16) -> TcpStream {
        use std::io::BufRead;
        let out = server.stdout.take().expect("s_server's stdout is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if line.trim() == "ACCEPT" {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(IO_TIMEOUT)
            .expect("openssl s_server did not listen");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
        timeouts(&s);
        s
    }

    fn files(id: &RankIdentity) -> PrivatePemDir {
        PrivatePemDir::create(id).unwrap()
    }

    fn s_server(dir: &PrivatePemDir, port: u16, version: &str) -> Child {
        let p = dir.path();
        Command::new(openssl())
            .args(["s_server", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(p.join(config::CERT_FILE))
            .arg("-key")
            .arg(p.join(config::KEY_FILE))
            .arg("-CAfile")
            .arg(p.join(config::CA_FILE))
            .args([
                "-Verify",
                "1",
                "-verify_return_error",
                "-naccept",
                "1",
                "-rev",
            ])
            .arg(version)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn openssl s_server")
    }

    fn s_client(dir: &PrivatePemDir, port: u16, version: &str) -> Child {
        let p = dir.path();
        Command::new(openssl())
            .arg("s_client")
            .arg("-connect")
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(p.join(config::CERT_FILE))
            .arg("-key")
            .arg(p.join(config::KEY_FILE))
            .arg("-CAfile")
            .arg(p.join(config::CA_FILE))
            .args([
                "-verify_return_error",
                "-verify_ip",
                "127.0.0.1",
                "-ign_eof",
            ])
            .arg(version)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn openssl s_client")
    }

    fn ids() -> (RankIdentity, RankIdentity) {
        let ca = JobCa::generate(JOB, deadline()).unwrap();
        (
            ca.issue_rank(0, "127.0.0.1").unwrap(),
            ca.issue_rank(1, "127.0.0.1").unwrap(),
        )
    }

    #[test]
    fn our_client_with_openssl_server() {
        let (r0, r1) = ids();
        let d1 = files(&r1);
        let port = free_port();
        let mut child = s_server(&d1, port, "-tls1_3");
        let sock = dial_when_listening(&mut child, port);
        let result = config::connect(client_cfg(&r0), sock, "127.0.0.1", &JOB, 1).map(
            |mut s: StreamOwned<ClientConnection, TcpStream>| {
                s.write_all(b"sperli\n").unwrap();
                s.flush().unwrap();
                let mut buf = [0u8; 7];
                s.read_exact(&mut buf).unwrap();
                buf
            },
        );
        let out = wait_bounded(child, Duration::from_secs(5));
        let buf = result.unwrap_or_else(|e| {
            panic!(
                "{e}\n--- s_server stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(&buf, b"ilreps\n");
    }

    #[test]
    fn openssl_client_with_our_server() {
        let (r0, r1) = ids();
        let d0 = files(&r0);
        let (l, addr) = listen();
        let cfg = config::server_config_from_pem(
            r1.ca_cert_pem.as_bytes(),
            r1.cert_pem.as_bytes(),
            r1.key_pem().as_bytes(),
        )
        .unwrap();
        let server = thread::spawn(move || -> Result<(), Error> {
            let mut s = config::accept(cfg, accept_one(&l), &JOB, 0)?;
            let mut buf = [0u8; 6];
            s.read_exact(&mut buf).map_err(|e| Error::io("read", &e))?;
            assert_eq!(&buf, b"hello\n");
            s.write_all(b"sperli\n")
                .map_err(|e| Error::io("write", &e))?;
            s.conn.send_close_notify();
            s.flush().map_err(|e| Error::io("flush", &e))?;
            Ok(())
        });
        let mut child = s_client(&d0, addr.port(), "-tls1_3");
        child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        let out = wait_bounded(child, Duration::from_secs(10));
        let stdout = String::from_utf8_lossy(&out.stdout);
        server.join().unwrap().unwrap_or_else(|e| {
            panic!(
                "{e}\n--- s_client stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(stdout.contains("TLSv1.3"), "{stdout}");
        assert!(stdout.contains("sperli"), "{stdout}");
        assert!(stdout.contains("Verify return code: 0 (ok)"), "{stdout}");
    }

    #[test]
    fn openssl_tls12_client_is_refused() {
        let (r0, r1) = ids();
        let d0 = files(&r0);
        let (l, addr) = listen();
        let cfg = config::server_config_from_pem(
            r1.ca_cert_pem.as_bytes(),
            r1.cert_pem.as_bytes(),
            r1.key_pem().as_bytes(),
        )
        .unwrap();
        let server = thread::spawn(move || config::accept(cfg, accept_one(&l), &JOB, 0).err());
        let child = s_client(&d0, addr.port(), "-tls1_2");
        let out = wait_bounded(child, Duration::from_secs(10));
        let e = server.join().unwrap().expect("TLS 1.2 must be refused");
        assert_eq!(tls_err(&e), Some(TlsFailure::ProtocolVersion), "{e}");
        assert!(!out.status.success());
    }

    #[test]
    fn openssl_tls12_server_is_refused() {
        let (r0, r1) = ids();
        let d1 = files(&r1);
        let port = free_port();
        let mut child = s_server(&d1, port, "-tls1_2");
        let sock = dial_when_listening(&mut child, port);
        let result = config::connect(client_cfg(&r0), sock, "127.0.0.1", &JOB, 1);
        let _ = wait_bounded(child, Duration::from_secs(5));
        let e = result.expect_err("TLS 1.2 server must be refused");
        assert_eq!(e.h_code(), Some(HCode::H1611));
        assert_eq!(tls_err(&e), Some(TlsFailure::ProtocolVersion), "{e}");
    }
}
