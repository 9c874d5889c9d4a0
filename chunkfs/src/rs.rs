//! Reed-Solomon striping as QFS does it: a block's bytes go in cells of `cell_bytes`, round
//! robin over `data` chunks; stripe `s` is cell `s` of every data chunk, and `parity` chunks
//! hold, at offset `s * cell_bytes`, the parity of stripe `s` (a short last stripe is padded
//! with zeros). Any `data` of the `data + parity` chunks rebuild a stripe. Pure arithmetic and
//! coding, no I/O.

use reed_solomon_erasure::galois_8::ReedSolomon;

use crate::Layout;

/// The length of chunk `k` of a block of `block_len` logical bytes.
pub fn chunk_len(layout: Layout, block_len: u64, k: usize) -> u64 {
    match layout {
        Layout::Replicated { .. } => block_len,
        Layout::Striped {
            data, cell_bytes, ..
        } => {
            let c = u64::from(cell_bytes);
            let stripe = c * u64::from(data);
            let full = block_len / stripe;
            let rem = block_len % stripe;
            if k < data as usize {
                full * c + rem.saturating_sub(k as u64 * c).min(c)
            } else {
                (full + u64::from(rem > 0)) * c
            }
        }
    }
}

/// Where logical byte `x` of a striped block lives: (stripe, data chunk, offset in that chunk).
pub fn locate(data: u32, cell_bytes: u32, x: u64) -> (u64, usize, u64) {
    let c = u64::from(cell_bytes);
    let stripe_bytes = c * u64::from(data);
    let s = x / stripe_bytes;
    let k = ((x % stripe_bytes) / c) as usize;
    (s, k, s * c + x % c)
}

/// A coder for `data + parity` shards.
pub struct Coder {
    rs: ReedSolomon,
    data: usize,
    parity: usize,
}

impl std::fmt::Debug for Coder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Coder({}+{})", self.data, self.parity)
    }
}

impl Coder {
    pub fn new(data: usize, parity: usize) -> Result<Self, String> {
        let rs = ReedSolomon::new(data, parity)
            .map_err(|e| format!("Reed-Solomon {data}+{parity}: {e:?}"))?;
        Ok(Self { rs, data, parity })
    }

    /// The parity cells of one stripe; `cells` are the data cells, each zero-padded to `cell`.
    pub fn parity(&self, cells: &[&[u8]], cell: usize) -> Vec<Vec<u8>> {
        let mut shards: Vec<Vec<u8>> = Vec::with_capacity(self.data + self.parity);
        for k in 0..self.data {
            let mut v = vec![0u8; cell];
            if let Some(c) = cells.get(k) {
                let n = c.len().min(cell);
                v[..n].copy_from_slice(&c[..n]);
            }
            shards.push(v);
        }
        for _ in 0..self.parity {
            shards.push(vec![0u8; cell]);
        }
        self.rs
            .encode(&mut shards)
            .expect("shards are all the same length and count");
        shards.split_off(self.data)
    }

    /// Rebuilds the missing shards of a stripe (each present one `cell` bytes, zero-padded);
    /// fails when fewer than `data` are present.
    pub fn reconstruct(&self, shards: &mut [Option<Vec<u8>>]) -> Result<(), String> {
        self.rs
            .reconstruct(shards)
            .map_err(|e| format!("cannot rebuild the stripe: {e:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_lengths_add_up_and_locate_agrees() {
        let layout = Layout::Striped {
            data: 6,
            parity: 3,
            cell_bytes: 10,
        };
        for len in [0u64, 1, 9, 10, 59, 60, 61, 125, 600] {
            let data: u64 = (0..6).map(|k| chunk_len(layout, len, k)).sum();
            assert_eq!(data, len, "block of {len}");
            let parity = chunk_len(layout, len, 6);
            assert_eq!(parity, len.div_ceil(60) * 10);
        }
        assert_eq!(locate(6, 10, 0), (0, 0, 0));
        assert_eq!(locate(6, 10, 15), (0, 1, 5));
        assert_eq!(locate(6, 10, 61), (1, 0, 11));
    }

    #[test]
    fn any_six_of_nine_rebuild_a_stripe() {
        let coder = Coder::new(6, 3).unwrap();
        let cells: Vec<Vec<u8>> = (0..6u8).map(|k| vec![k * 17 + 1; 8]).collect();
        let refs: Vec<&[u8]> = cells.iter().map(|c| c.as_slice()).collect();
        let parity = coder.parity(&refs[..5], 8);
        let mut shards: Vec<Option<Vec<u8>>> = cells[..5]
            .iter()
            .cloned()
            .chain(std::iter::once(vec![0u8; 8]))
            .chain(parity)
            .map(Some)
            .collect();
        shards[0] = None;
        shards[2] = None;
        shards[7] = None;
        coder.reconstruct(&mut shards).unwrap();
        assert_eq!(shards[0].as_deref(), Some(&cells[0][..]));
        assert_eq!(shards[2].as_deref(), Some(&cells[2][..]));
        assert_eq!(shards[5].as_deref(), Some(&[0u8; 8][..]));
        shards[0] = None;
        shards[1] = None;
        shards[3] = None;
        shards[4] = None;
        assert!(coder.reconstruct(&mut shards).is_err());
    }
}
