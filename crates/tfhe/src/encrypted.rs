//! The encrypted backend: tfhe-rs boolean gates (CGGI gate bootstrapping) on the server's
//! evaluation key, and the client's side (keys, bit encryption, decryption).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tfhe::boolean::ciphertext::{Ciphertext, CompressedCiphertext};
use tfhe::boolean::client_key::ClientKey;
use tfhe::boolean::parameters::{BooleanParameters, DEFAULT_PARAMETERS};
use tfhe::boolean::server_key::{BinaryBooleanGates, CompressedServerKey, ServerKey};

use crate::backend::Backend;
use crate::Error;

/// The parameter set of every default path: tfhe-rs's `DEFAULT_PARAMETERS` (132-bit security
/// by its lattice estimate, bootstrapping failure probability ≤ 2^-64 per gate).
pub const PARAMETERS: BooleanParameters = DEFAULT_PARAMETERS;

/// The client's secret key and the server key it derives (the bootstrapping and key-switching
/// keys the server evaluates gates with).
pub fn generate_keys() -> (ClientKey, ServerKey) {
    let ck = ClientKey::new(&PARAMETERS);
    let sk = ServerKey::new(&ck);
    (ck, sk)
}

/// The client's keys in the form it uploads: the server key seeded (only the bodies of the
/// bootstrapping and key-switching keys travel, the masks regrow from a seed), which the
/// server expands once with [`CompressedServerKey::decompress`].
pub fn generate_client_keys() -> (ClientKey, CompressedServerKey) {
    let ck = ClientKey::new(&PARAMETERS);
    let sk = CompressedServerKey::new(&ck);
    (ck, sk)
}

/// The server's expansion of uploaded seeded ciphertexts.
pub fn decompress(cts: &[CompressedCiphertext]) -> Vec<Ciphertext> {
    cts.iter().map(CompressedCiphertext::decompress).collect()
}

/// Bytes of a value in tfhe-rs's serialised form (bincode, as tfhe-rs writes it): what the
/// client uploads for a key or a ciphertext.
pub fn serialized_bytes<T: serde::Serialize>(value: &T) -> Result<u64, Error> {
    Ok(bincode::serialized_size(value)?)
}

/// Runs gates on ciphertexts with the server key. Every fork shares one progress counter, so a
/// server can report gates done while a layer runs on all cores.
#[derive(Clone)]
pub struct Encrypted<'k> {
    key: &'k ServerKey,
    done: Arc<AtomicU64>,
}

impl<'k> Encrypted<'k> {
    pub fn new(key: &'k ServerKey) -> Self {
        Self {
            key,
            done: Arc::new(AtomicU64::new(0)),
        }
    }
    /// Bootstraps run so far by this backend and all its forks.
    pub fn bootstraps(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
    /// The shared counter, for a progress display on another thread.
    pub fn progress(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.done)
    }
    fn tick(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
}

impl Backend for Encrypted<'_> {
    type Wire = Ciphertext;
    fn xor(&mut self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        self.tick(1);
        self.key.xor(a, b)
    }
    fn and(&mut self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        self.tick(1);
        self.key.and(a, b)
    }
    fn or(&mut self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        self.tick(1);
        self.key.or(a, b)
    }
    fn not(&mut self, a: &Ciphertext) -> Ciphertext {
        self.key.not(a)
    }
    fn mux(&mut self, s: &Ciphertext, t: &Ciphertext, f: &Ciphertext) -> Ciphertext {
        self.tick(2);
        self.key.mux(s, t, f)
    }
    fn constant(&mut self, v: bool) -> Ciphertext {
        self.key.trivial_encrypt(v)
    }
    fn fork(&self) -> Self {
        self.clone()
    }
    fn absorb(&mut self, _other: Self) {}
}

impl crate::network::Network {
    /// The server's evaluation: input ciphertexts (`input_bits()` per value, bit 0 first, then
    /// an encryption of zero) in, `output_bits()` freshly bootstrapped ciphertexts per output
    /// value out. No interaction with the client.
    pub fn evaluate(
        &self,
        key: &ServerKey,
        input: &[Ciphertext],
    ) -> Result<Vec<Ciphertext>, Error> {
        let mut b = Encrypted::new(key);
        self.evaluate_encrypted(&mut b, input)
    }

    /// [`Self::evaluate`] on a caller's backend (to watch its progress counter).
    pub fn evaluate_encrypted(
        &self,
        b: &mut Encrypted<'_>,
        input: &[Ciphertext],
    ) -> Result<Vec<Ciphertext>, Error> {
        let Some((zero, bits)) = input.split_last() else {
            return Err(Error::CiphertextCount {
                got: 0,
                want: self.input_ciphertexts(),
            });
        };
        if input.len() != self.input_ciphertexts() {
            return Err(Error::CiphertextCount {
                got: input.len(),
                want: self.input_ciphertexts(),
            });
        }
        let words = self.input_words(bits)?;
        let out = self.evaluate_with(b, words)?;
        Ok(self.refresh_outputs(b, &out, zero))
    }

    /// The plaintext bits the client encrypts: `input_bits()` per value (bit 0 first), then a
    /// zero for [`crate::Network::refresh_outputs`].
    fn client_bits(&self, x: &[i64]) -> Result<Vec<bool>, Error> {
        self.check_input(x)?;
        let mut bits: Vec<bool> = x
            .iter()
            .flat_map(|v| crate::int::value_bits(*v, self.input_bits()))
            .collect();
        bits.push(false);
        Ok(bits)
    }

    /// The client's encryption of an input vector (checked against the input format).
    pub fn encrypt_input(&self, key: &ClientKey, x: &[i64]) -> Result<Vec<Ciphertext>, Error> {
        Ok(self
            .client_bits(x)?
            .into_iter()
            .map(|bit| key.encrypt(bit))
            .collect())
    }

    /// [`Self::encrypt_input`] as seeded ciphertexts (a body and a seed each: what the client
    /// uploads; the server calls [`decompress`]).
    pub fn encrypt_input_compressed(
        &self,
        key: &ClientKey,
        x: &[i64],
    ) -> Result<Vec<CompressedCiphertext>, Error> {
        Ok(self
            .client_bits(x)?
            .into_iter()
            .map(|bit| key.encrypt_compressed(bit))
            .collect())
    }

    /// The client's decryption of the output ciphertexts.
    pub fn decrypt_output(&self, key: &ClientKey, out: &[Ciphertext]) -> Result<Vec<i64>, Error> {
        let per = self.output_bits();
        if out.len() != self.output_len() * per {
            return Err(Error::CiphertextCount {
                got: out.len(),
                want: self.output_len() * per,
            });
        }
        Ok(out
            .chunks(per)
            .map(|c| {
                crate::int::bits_value(&c.iter().map(|ct| key.decrypt(ct)).collect::<Vec<_>>())
            })
            .collect())
    }
}
