//! A SHE session over real loopback TCP on the served path with the Noise channel: the client
//! uploads its server key once, two samples are evaluated on the PBS path and decrypt to the
//! reference; a peer that is not a SHE client is refused with a typed error.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]
use std::net::TcpListener;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

use secinfer_net::{
    connect_session, serve_sessions, Admitted, Channel, ClientConfig, Identity, NetError, PeerKey,
    ServeConfig, ServerSecurity, ServerStats, SessionHandler, TcpChannel,
};
use secinfer_tfhe::session::{client_session, serve_session, ServerReport};
use secinfer_tfhe::{Error, InputFormat, Layer, Network, PbsNetwork, Pow2Linear, Shape};

struct She {
    pbs: PbsNetwork,
    ends: Mutex<Sender<Result<ServerReport, Error>>>,
}

impl SessionHandler for She {
    fn session(&self, _who: &Admitted, ch: Result<TcpChannel, NetError>) {
        let r = ch
            .map_err(Error::from)
            .and_then(|mut ch| serve_session(&mut ch, &self.pbs, &|_, _, _| {}));
        let _ = self.ends.lock().unwrap().send(r);
    }
}

fn tiny() -> Network {
    let lin = |outputs: usize, fan_in: usize, sign: &[i8], exp: &[i8], bias: &[i64]| Pow2Linear {
        name: "l".into(),
        outputs,
        fan_in,
        sign: sign.to_vec(),
        exp: exp.to_vec(),
        bias: bias.to_vec(),
        offset: 0,
    };
    Network::new(
        InputFormat {
            shape: Shape::flat(2),
            bits: 3,
            signed: false,
        },
        vec![
            Layer::Dense(lin(2, 2, &[1, -1, -1, 1], &[0, -1, 1, 0], &[1, 2])),
            Layer::Requant {
                shift: 0,
                bits: 2,
                relu: true,
            },
            Layer::Dense(lin(2, 2, &[1, 1, -1, 1], &[1, 0, 0, -1], &[0, -3])),
        ],
    )
    .unwrap()
}

#[test]
fn session_over_tcp_with_noise_equals_reference() {
    let net = tiny();
    let pbs = PbsNetwork::new(&net).unwrap();
    let id = Arc::new(Identity::generate().unwrap());
    let key = id.public();
    let mut cfg = ServeConfig::new(1, ServerSecurity::Noise(id));
    cfg.stop_after = Some(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, ends) = channel();
    let handler = She {
        pbs: pbs.clone(),
        ends: Mutex::new(tx),
    };
    let server = std::thread::spawn(move || {
        let stats = ServerStats::default();
        serve_sessions(&l, &cfg, &stats, &handler).unwrap();
    });
    let samples = vec![vec![5, 2], vec![0, 7]];
    let mut ch = connect_session(&addr, &ClientConfig::new(PeerKey::Pinned(key))).unwrap();
    let rep = client_session(&mut ch, pbs.info(), &samples).unwrap();
    drop(ch);
    for (x, s) in samples.iter().zip(&rep.samples) {
        assert_eq!(s.output, net.reference(x).unwrap());
        assert!(s.upload_bytes > 0 && s.download_bytes > 0);
    }
    let srv = ends.recv().unwrap().unwrap();
    assert_eq!(srv.samples, 2);
    assert_eq!(srv.key_bytes, rep.key_bytes);
    assert_eq!(srv.pbs, 2 * pbs.count().pbs);
    // A peer speaking another protocol: the server's session ends with a typed refusal.
    let mut ch = connect_session(&addr, &ClientConfig::new(PeerKey::Pinned(key))).unwrap();
    ch.send_frame(b"GET / HTTP/1.1\r\n\r\n\0\0").unwrap();
    ch.flush().unwrap();
    assert!(matches!(ends.recv().unwrap(), Err(Error::Peer(_))));
    drop(ch);
    server.join().unwrap();
}
