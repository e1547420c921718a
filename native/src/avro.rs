//! `AvroReader`: an Avro payload read with its writer's schema into the Python values fastavro's
//! `schemaless_reader` gives for it (the twin: `codec/avro.py`, `AvroDecoder`, with fastavro
//! 1.13 behind it), for a schema compiled once into a table of nodes (`codec/native.py`,
//! `avro_reader`, builds it from the schema fastavro parsed).
//!
//! It reads only what it reads exactly as fastavro does and declines the record (None) at
//! anything else, which fastavro then reads, or refuses with its reason: a payload that ends
//! early or has bytes past the record, a varint of more than 10 bytes, a negative length, a
//! union branch or enum symbol outside the schema's list (fastavro takes a negative one from the
//! list's end, as Python indexes), a string that is not UTF-8, a block count of -2^63.
//!
//! A node's children come before it in its table, so the recursion here ends; and it is no
//! deeper than the schema nests, at most `MAX_SCHEMA_DEPTH` (100) types: `codec/avro.py`
//! refuses deeper and recursive schemas before they are compiled.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};

/// One type of the schema; children by their index in the table.
enum Node {
    Null,
    Boolean,
    Long, // int and long: fastavro reads both as a long
    Float,
    Double,
    Bytes,
    Str,
    Fixed(usize),
    Enum(Vec<Py<PyString>>),
    Array(usize),
    Map(usize),
    Union(Vec<usize>),
    Record(Vec<(Py<PyString>, usize)>),
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.i.checked_add(n)?;
        let out = self.s.get(self.i..end)?;
        self.i = end;
        Some(out)
    }

    /// A zig-zag varint as fastavro's `read_long` reads it, up to 10 bytes.
    fn long(&mut self) -> Option<i64> {
        let (mut n, mut shift) = (0u64, 0u32);
        loop {
            let b = *self.s.get(self.i)?;
            self.i += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(((n >> 1) as i64) ^ -((n & 1) as i64));
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }

    /// A length (of bytes, a string): a long, not negative.
    fn length(&mut self) -> Option<usize> {
        usize::try_from(self.long()?).ok()
    }

    /// An index into a list of `n`: a long in [0, n).
    fn index(&mut self, n: usize) -> Option<usize> {
        usize::try_from(self.long()?).ok().filter(|&i| i < n)
    }

    /// A block's count of items: its absolute value, the block's size after a negative one
    /// read and left unused.
    fn block(&mut self) -> Option<u64> {
        let count = self.long()?;
        if count < 0 {
            self.long()?;
            return count.checked_neg().map(|c| c as u64);
        }
        Some(count as u64)
    }

    /// The items of an array or a map, block by block to the empty block, each read by `item`.
    fn blocks(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        loop {
            let count = self.block()?;
            if count == 0 {
                return Some(());
            }
            for _ in 0..count {
                item(self)?;
            }
        }
    }

    /// A string: a length, then that many bytes of UTF-8.
    fn string<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyString>> {
        let n = self.length()?;
        Some(PyString::new(py, std::str::from_utf8(self.take(n)?).ok()?))
    }
}

#[pyclass(frozen)]
pub struct AvroReader {
    nodes: Vec<Node>,
    root: usize,
}

fn bad(what: &str) -> PyErr {
    PyValueError::new_err(format!("not an Avro reader's table: {what}"))
}

impl AvroReader {
    fn value<'py>(&self, py: Python<'py>, node: usize, c: &mut Cursor) -> Option<Bound<'py, PyAny>> {
        Some(match &self.nodes[node] {
            Node::Null => py.None().into_bound(py),
            Node::Boolean => PyBool::new(py, c.take(1)?[0] != 0).to_owned().into_any(),
            Node::Long => c.long()?.into_pyobject(py).ok()?.into_any(),
            Node::Float => {
                let b: [u8; 4] = c.take(4)?.try_into().ok()?;
                PyFloat::new(py, f64::from(f32::from_le_bytes(b))).into_any()
            }
            Node::Double => {
                let b: [u8; 8] = c.take(8)?.try_into().ok()?;
                PyFloat::new(py, f64::from_le_bytes(b)).into_any()
            }
            Node::Bytes => {
                let n = c.length()?;
                PyBytes::new(py, c.take(n)?).into_any()
            }
            Node::Str => c.string(py)?.into_any(),
            Node::Fixed(n) => PyBytes::new(py, c.take(*n)?).into_any(),
            Node::Enum(symbols) => symbols[c.index(symbols.len())?].bind(py).clone().into_any(),
            Node::Array(item) => {
                let out = PyList::empty(py);
                c.blocks(|c| out.append(self.value(py, *item, c)?).ok())?;
                out.into_any()
            }
            Node::Map(values) => {
                let out = PyDict::new(py);
                c.blocks(|c| out.set_item(c.string(py)?, self.value(py, *values, c)?).ok())?;
                out.into_any()
            }
            Node::Union(branches) => return self.value(py, branches[c.index(branches.len())?], c),
            Node::Record(fields) => {
                let out = PyDict::new(py);
                for (name, node) in fields {
                    out.set_item(name.bind(py), self.value(py, *node, c)?).ok()?;
                }
                out.into_any()
            }
        })
    }
}

#[pymethods]
impl AvroReader {
    /// The table: one tuple a node, `(kind,)` or `(kind, argument)`, kinds 0–6 null, boolean,
    /// long, float, double, bytes, string; 7 fixed (its size), 8 enum (its symbols), 9 array
    /// (its items' node), 10 map (its values' node), 11 union (its branches' nodes), 12 record
    /// (its fields' `(name, node)`); `root` the record's node. A node's children come before
    /// it in the table, so no node holds itself and the reading ends.
    #[new]
    fn new(table: &Bound<'_, PyList>, root: usize) -> PyResult<Self> {
        let count = table.len();
        let mut nodes = Vec::with_capacity(count);
        for (me, entry) in table.iter().enumerate() {
            let node_at = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
                let i: usize = v.extract()?;
                if i < me { Ok(i) } else { Err(bad("a child not before its node")) }
            };
            let entry = entry.cast::<PyTuple>().map_err(|_| bad("a node that is not a tuple"))?;
            let kind: u8 = entry.get_item(0)?.extract()?;
            let arg = || entry.get_item(1);
            nodes.push(match kind {
                0 => Node::Null,
                1 => Node::Boolean,
                2 => Node::Long,
                3 => Node::Float,
                4 => Node::Double,
                5 => Node::Bytes,
                6 => Node::Str,
                7 => Node::Fixed(arg()?.extract()?),
                8 => Node::Enum(arg()?.extract()?),
                9 => Node::Array(node_at(&arg()?)?),
                10 => Node::Map(node_at(&arg()?)?),
                11 => Node::Union(arg()?.try_iter()?.map(|b| node_at(&b?)).collect::<PyResult<_>>()?),
                12 => Node::Record(
                    arg()?
                        .try_iter()?
                        .map(|f| {
                            let (name, node): (Py<PyString>, Bound<'_, PyAny>) = f?.extract()?;
                            Ok((name, node_at(&node)?))
                        })
                        .collect::<PyResult<_>>()?,
                ),
                _ => return Err(bad("an unknown kind")),
            });
        }
        if root >= count {
            return Err(bad("a root past the table's end"));
        }
        Ok(AvroReader { nodes, root })
    }

    /// The record in `value[start:]`, read whole; None where it declines the record.
    fn read<'py>(&self, py: Python<'py>, value: &Bound<'py, PyBytes>, start: usize) -> Option<Bound<'py, PyAny>> {
        let s = value.as_bytes();
        let mut c = Cursor { s, i: start.min(s.len()) };
        let record = self.value(py, self.root, &mut c)?;
        (c.i == s.len()).then_some(record)
    }
}
