//! A reader of GGUF files (version 2 and 3): the metadata key/values and the tensor table,
//! with each tensor's bytes read on demand (seek + read), so loading never holds the whole
//! file in memory.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::LocalError;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    String(String),
    /// Arrays of strings (the vocabulary).
    Strings(Vec<String>),
    /// Arrays of numbers, widened (scores, token types).
    Numbers(Vec<f64>),
}

impl Value {
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) => Some(v),
            Value::I64(v) => u64::try_from(v).ok(),
            Value::Bool(v) => Some(u64::from(v)),
            _ => None,
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::U64(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
}

/// ggml tensor types this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q5_0,
    Q4_0,
    Q4_1,
    Q4K,
    Q5K,
    Q6K,
}

impl DType {
    fn from_id(id: u32) -> Option<DType> {
        Some(match id {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::Q4_0,
            3 => DType::Q4_1,
            6 => DType::Q5_0,
            8 => DType::Q8_0,
            12 => DType::Q4K,
            13 => DType::Q5K,
            14 => DType::Q6K,
            30 => DType::BF16,
            _ => return None,
        })
    }

    /// (elements per block, bytes per block).
    pub(crate) fn block(self) -> (usize, usize) {
        match self {
            DType::F32 => (1, 4),
            DType::F16 | DType::BF16 => (1, 2),
            DType::Q8_0 => (32, 34),
            DType::Q5_0 => (32, 22),
            DType::Q4_0 => (32, 18),
            DType::Q4_1 => (32, 20),
            DType::Q4K => (256, 144),
            DType::Q5K => (256, 176),
            DType::Q6K => (256, 210),
        }
    }
}

/// One entry of the tensor table.
#[derive(Debug, Clone)]
pub(crate) struct TensorInfo {
    /// ggml order: `dims[0]` is the contiguous (row) length.
    pub(crate) dims: Vec<usize>,
    /// `None` for a type this crate cannot read (only an error if the tensor is used).
    pub(crate) dtype: Option<DType>,
    pub(crate) type_id: u32,
    /// Absolute file offset of the data.
    offset: u64,
}

impl TensorInfo {
    pub(crate) fn elements(&self) -> usize {
        self.dims.iter().product()
    }
}

/// An open GGUF file: metadata and tensor table parsed, tensor data read on demand.
pub(crate) struct Gguf {
    path: PathBuf,
    file: File,
    pub(crate) metadata: HashMap<String, Value>,
    pub(crate) tensors: HashMap<String, TensorInfo>,
}

/// Longest string or array accepted, so a corrupt length cannot ask for terabytes.
const MAX_LEN: u64 = 1 << 28;

struct Cursor<R> {
    r: R,
    path: PathBuf,
}

impl<R: Read> Cursor<R> {
    fn bad(&self, message: impl Into<String>) -> LocalError {
        LocalError::InvalidModel {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], LocalError> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b).map_err(|e| LocalError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, LocalError> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64, LocalError> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn len(&mut self) -> Result<usize, LocalError> {
        let n = self.u64()?;
        if n > MAX_LEN {
            return Err(self.bad(format!("a length of {n} is implausible")));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<String, LocalError> {
        let n = self.len()?;
        let mut b = vec![0u8; n];
        self.r.read_exact(&mut b).map_err(|e| LocalError::Io {
            path: self.path.clone(),
            source: e,
        })?;
        // Vocabularies hold pieces that are not valid UTF-8 on their own only as byte
        // tokens, which are spelled `<0xNN>`; anything else is repaired, not rejected.
        Ok(String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into()))
    }

    fn scalar(&mut self, ty: u32) -> Result<Value, LocalError> {
        Ok(match ty {
            0 => Value::U64(u64::from(self.bytes::<1>()?[0])),
            1 => Value::I64(i64::from(self.bytes::<1>()?[0] as i8)),
            2 => Value::U64(u64::from(u16::from_le_bytes(self.bytes()?))),
            3 => Value::I64(i64::from(i16::from_le_bytes(self.bytes()?))),
            4 => Value::U64(u64::from(self.u32()?)),
            5 => Value::I64(i64::from(i32::from_le_bytes(self.bytes()?))),
            6 => Value::F64(f64::from(f32::from_le_bytes(self.bytes()?))),
            7 => Value::Bool(self.bytes::<1>()?[0] != 0),
            8 => Value::String(self.string()?),
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.bytes()?)),
            12 => Value::F64(f64::from_le_bytes(self.bytes()?)),
            other => return Err(self.bad(format!("unknown metadata type {other}"))),
        })
    }

    fn value(&mut self, ty: u32) -> Result<Value, LocalError> {
        if ty != 9 {
            return self.scalar(ty);
        }
        let item = self.u32()?;
        let n = self.len()?;
        match item {
            8 => {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.string()?);
                }
                Ok(Value::Strings(v))
            }
            9 => Err(self.bad("nested metadata arrays are not supported")),
            _ => {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let x = self.scalar(item)?;
                    v.push(match x {
                        Value::U64(x) => x as f64,
                        Value::I64(x) => x as f64,
                        Value::F64(x) => x,
                        Value::Bool(x) => f64::from(u8::from(x)),
                        _ => return Err(self.bad("a numeric array holds a string")),
                    });
                }
                Ok(Value::Numbers(v))
            }
        }
    }
}

impl Gguf {
    /// Opens `path` and reads its metadata and tensor table.
    pub(crate) fn open(path: &Path) -> Result<Gguf, LocalError> {
        let io = |source| LocalError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let mut c = Cursor {
            r: BufReader::with_capacity(1 << 16, file.try_clone().map_err(io)?),
            path: path.to_owned(),
        };
        if &c.bytes::<4>()? != b"GGUF" {
            return Err(c.bad("not a GGUF file"));
        }
        let version = c.u32()?;
        if !(2..=3).contains(&version) {
            return Err(c.bad(format!("GGUF version {version} is not supported")));
        }
        let tensor_count = c.len()?;
        let kv_count = c.len()?;
        let mut metadata = HashMap::with_capacity(kv_count);
        for _ in 0..kv_count {
            let key = c.string()?;
            let ty = c.u32()?;
            let value = c.value(ty)?;
            metadata.insert(key, value);
        }
        let mut table = Vec::with_capacity(tensor_count);
        for _ in 0..tensor_count {
            let name = c.string()?;
            let n_dims = c.u32()?;
            if n_dims == 0 || n_dims > 4 {
                return Err(c.bad(format!("tensor {name} has {n_dims} dimensions")));
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(c.len()?);
            }
            let type_id = c.u32()?;
            let offset = c.u64()?;
            table.push((name, dims, type_id, offset));
        }
        let header_end = c.r.stream_position().map_err(io)?;
        let alignment = metadata
            .get("general.alignment")
            .and_then(Value::as_u64)
            .unwrap_or(32)
            .max(1);
        let data_start = header_end.div_ceil(alignment) * alignment;
        let file_len = file.metadata().map_err(io)?.len();
        let mut tensors = HashMap::with_capacity(table.len());
        for (name, dims, type_id, offset) in table {
            let dtype = DType::from_id(type_id);
            let info = TensorInfo {
                dims,
                dtype,
                type_id,
                offset: data_start + offset,
            };
            if let Some(dt) = dtype {
                let (per, bytes) = dt.block();
                let n = info.elements();
                if !n.is_multiple_of(per) || info.offset + (n / per * bytes) as u64 > file_len {
                    return Err(c.bad(format!("tensor {name} lies outside the file")));
                }
            }
            tensors.insert(name, info);
        }
        Ok(Gguf {
            path: path.to_owned(),
            file,
            metadata,
            tensors,
        })
    }

    pub(crate) fn bad(&self, message: impl Into<String>) -> LocalError {
        LocalError::InvalidModel {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    pub(crate) fn u64(&self, key: &str) -> Result<u64, LocalError> {
        self.get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| self.bad(format!("metadata {key} is missing")))
    }

    pub(crate) fn string(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn info(&self, name: &str) -> Result<&TensorInfo, LocalError> {
        self.tensors
            .get(name)
            .ok_or_else(|| self.bad(format!("tensor {name} is missing")))
    }

    /// Bytes `start..start + len` of tensor `name`'s data.
    pub(crate) fn raw_range(
        &self,
        name: &str,
        start: usize,
        len: usize,
    ) -> Result<Vec<u8>, LocalError> {
        let info = self.info(name)?;
        let mut buf = vec![0u8; len];
        let io = |source| LocalError::Io {
            path: self.path.clone(),
            source,
        };
        let mut f = &self.file;
        f.seek(SeekFrom::Start(info.offset + start as u64))
            .map_err(io)?;
        f.read_exact(&mut buf).map_err(io)?;
        Ok(buf)
    }

    /// The raw bytes of tensor `name`, with its info.
    pub(crate) fn raw(&self, name: &str) -> Result<(TensorInfo, Vec<u8>), LocalError> {
        let info = self.info(name)?.clone();
        let dtype = info.dtype.ok_or_else(|| {
            self.bad(format!(
                "tensor {name} has unsupported type {}",
                info.type_id
            ))
        })?;
        let (per, bytes) = dtype.block();
        let buf = self.raw_range(name, 0, info.elements() / per * bytes)?;
        Ok((info, buf))
    }
}
