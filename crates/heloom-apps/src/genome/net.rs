//! TCP transport: length-checked frames over a socket (localhost by default).

use super::protocol::{answer, serve_frame, Server, Transport};
use super::wire::{Header, Message, HEADER_LEN, MAX_PAYLOAD};
use crate::error::{AppError, Result};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The default address of `heloom genome serve`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7004";

/// Reads one frame (header, payload, checksum), refusing payloads over `max_payload` before
/// reading them. `Ok(None)` at a clean end of stream before a header.
pub fn read_frame(r: &mut impl Read, max_payload: usize) -> Result<Option<Vec<u8>>> {
    let mut head = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(AppError::Protocol(format!(
                    "connection closed inside a frame header ({got} of {HEADER_LEN} bytes)"
                )))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let h = Header::parse(&head, max_payload)?;
    let mut frame = head.to_vec();
    frame.resize(HEADER_LEN + h.length + 8, 0);
    r.read_exact(&mut frame[HEADER_LEN..]).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            AppError::Protocol(format!(
                "connection closed inside a frame ({} payload bytes announced)",
                h.length
            ))
        } else {
            e.into()
        }
    })?;
    Ok(Some(frame))
}

/// A client connection to a genome server.
#[derive(Debug)]
pub struct TcpTransport {
    stream: TcpStream,
    last: (usize, usize),
}

impl TcpTransport {
    /// Connects to `addr`, retrying for up to `wait` while the server starts.
    pub fn connect(addr: &str, wait: Duration) -> Result<Self> {
        let deadline = std::time::Instant::now() + wait;
        let addrs: Vec<_> = addr
            .to_socket_addrs()
            .map_err(|e| AppError::Invalid(format!("address {addr}: {e}")))?
            .collect();
        loop {
            let mut last_err = None;
            for a in &addrs {
                match TcpStream::connect(a) {
                    Ok(stream) => {
                        stream.set_nodelay(true)?;
                        return Ok(Self {
                            stream,
                            last: (0, 0),
                        });
                    }
                    Err(e) => last_err = Some(e),
                }
            }
            if std::time::Instant::now() >= deadline {
                return Err(AppError::Io(last_err.unwrap_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("no address for {addr}"),
                    )
                })));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Transport for TcpTransport {
    fn exchange(&mut self, msg: &Message, expect: (u64, u64)) -> Result<Message> {
        let out = msg.encode(expect.0, expect.1);
        self.stream.write_all(&out)?;
        self.stream.flush()?;
        let back = read_frame(&mut self.stream, MAX_PAYLOAD)?
            .ok_or_else(|| AppError::Protocol("the server closed the connection".into()))?;
        self.last = (out.len(), back.len());
        answer(&back, expect)
    }
    fn last_bytes(&self) -> (usize, usize) {
        self.last
    }
}

/// Serves one connection to its end: every frame is answered; a refused message is answered
/// with an `Error` frame and ends the connection. Returns the number of frames handled.
pub fn serve_connection(server: &Server, mut stream: TcpStream) -> Result<usize> {
    stream.set_nodelay(true)?;
    let mut session = server.session();
    let mut frames = 0;
    loop {
        let frame = match read_frame(&mut stream, MAX_PAYLOAD) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(frames),
            Err(e) => {
                let (fp, s) = session.expect().unwrap_or((0, 0));
                let _ = stream.write_all(
                    &Message::Error {
                        message: e.to_string(),
                    }
                    .encode(fp, s),
                );
                return Err(e);
            }
        };
        frames += 1;
        let (back, go_on) = serve_frame(&mut session, &frame);
        stream.write_all(&back)?;
        stream.flush()?;
        if !go_on {
            return Ok(frames);
        }
    }
}

/// Accepts connections on `listener` one after another; stops after `sessions` connections
/// when it is not zero. Errors of one connection are reported through `log` and do not stop
/// the server.
pub fn serve(
    server: &Server,
    listener: &TcpListener,
    sessions: usize,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let mut done = 0;
    for stream in listener.incoming() {
        let stream = stream?;
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        match serve_connection(server, stream) {
            Ok(n) => log(&format!("session with {peer}: {n} messages")),
            Err(e) => log(&format!("session with {peer} ended: {e}")),
        }
        done += 1;
        if sessions != 0 && done >= sessions {
            break;
        }
    }
    Ok(())
}
