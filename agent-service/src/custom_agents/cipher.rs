//! Stored agent keys are sealed with ChaCha20-Poly1305 (ring) under a key derived (HKDF-SHA256)
//! from a deployment secret, and bound to their row (owner and key id as associated data, so
//! a sealed value copied to another row does not open).
//!
//! The secret, first found wins: `DOCCHAT_AGENT_KEYS_SECRET` (dedicated, at least 16
//! characters); the internal JWT secret when services run apart (every replica has it); in
//! standalone mode (whose JWT secret is random per process) a 32-byte file under the data
//! directory, created on first start with mode 0600.

use std::path::Path;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};
use secrecy::ExposeSecret;

use docchat_common::config::Config;

/// Seals and opens stored key values. Deliberately without Debug.
pub struct Cipher {
    key: LessSafeKey,
    rng: SystemRandom,
}

#[expect(
    clippy::expect_used,
    reason = "ring fails these only for a 255×32-byte HKDF output, a short buffer or a broken system random source: bugs, not inputs"
)]
impl Cipher {
    /// A cipher for `secret` (any length; HKDF stretches it).
    pub fn new(secret: &[u8]) -> Cipher {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"docchat/agent-keys").extract(secret);
        let info = [b"chacha20-poly1305 v1".as_slice()];
        let okm = prk
            .expand(&info, &CHACHA20_POLY1305)
            .expect("32 bytes is within HKDF-SHA256's output limit");
        Cipher {
            key: LessSafeKey::new(UnboundKey::from(okm)),
            rng: SystemRandom::new(),
        }
    }

    /// The deployment's cipher; see the module documentation for where the secret comes
    /// from.
    pub fn from_deployment(config: &Config, standalone: bool) -> anyhow::Result<Cipher> {
        // At least 16 characters when set: Config::validate.
        if let Some(v) = &config.agent_keys_secret
            && !v.expose_secret().trim().is_empty()
        {
            return Ok(Cipher::new(v.expose_secret().trim().as_bytes()));
        }
        if !standalone && let Some(s) = &config.internal_jwt_secret {
            return Ok(Cipher::new(s.expose_secret().as_bytes()));
        }
        let file = config.data_dir.join("agent").join("agent-keys.secret");
        Ok(Cipher::new(&secret_file(&file)?))
    }

    /// nonce ‖ ciphertext ‖ tag of `value`, bound to `row`.
    pub fn seal(&self, row: &str, value: &str) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .expect("the system's random source works");
        let mut buf = value.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(row.as_bytes()),
                &mut buf,
            )
            .expect("sealing a short value cannot fail");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&buf);
        out
    }

    /// The value sealed for `row`; `None` when it does not open (another secret, another
    /// row, tampered).
    pub fn open(&self, row: &str, sealed: &[u8]) -> Option<String> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(row.as_bytes()), &mut buf)
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
}

/// The standalone secret: read, or created (0600) on first start.
fn secret_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(bytes) = std::fs::read(path) {
        anyhow::ensure!(bytes.len() >= 32, "{} is too short", path.display());
        return Ok(bytes);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut secret = [0u8; 32];
    SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| anyhow::anyhow!("no system randomness"))?;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(&secret)?;
            f.sync_all()?;
            Ok(secret.to_vec())
        }
        // Another process created it meanwhile.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(std::fs::read(path)?),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_for_their_row_and_secret() {
        let c = Cipher::new(b"a deployment secret");
        let sealed = c.seal("u1/k1", "sk-live-123");
        assert!(!sealed.windows(11).any(|w| w == b"sk-live-123"));
        assert_eq!(c.open("u1/k1", &sealed).as_deref(), Some("sk-live-123"));
        assert_eq!(c.open("u2/k1", &sealed), None);
        assert_eq!(Cipher::new(b"another secret").open("u1/k1", &sealed), None);
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(c.open("u1/k1", &tampered), None);
    }
}
