//! The compiled part of stream-perceptron. Each function here has a pure-Python twin in the
//! package that gives the same result bit for bit; the package uses this one where it is
//! installed (tests/unit/test_native.py compares the two on fuzzed and random inputs).
//!
//! * `read_dense`: a batch of plain dense input records into one float64 matrix, its labels and
//!   ids (the twin: `codec/dense_json.py` with the msgspec decoder behind it). It takes only what
//!   it reads exactly as they do and declines the whole batch (None) at anything else.
//! * `encode_predictions`: the prediction records of a batch, as msgspec writes them (the twin:
//!   `codec/outputs.py`, `encode_predictions`).
//! * `adwin_update`: ADWIN's insert, merge and test loop over a run of values (the twin:
//!   `model/drift.py`, `Adwin.update_many`), the same floating-point operations in the same
//!   order, the logarithm from the C library as Python's `math.log` takes it.
//! * `score_named`, `score_pair`: θ·x + θ0 of a dict row with θ by name (and u·x + u0 beside it,
//!   the averaged model's), summed in the row's order (the twins: `model/rowwise.py`,
//!   `dot_named` and `dot_pair`, as `Perceptron.predict_one` and `predict_proba_one` call them).
//!   None at a name not in θ, a value that is not a float, a bool or an integer of at most 53
//!   bits, or a sum that is not finite: the twin then takes the row and says what is wrong.
//!   `proba_named` gives `predict_proba_one`'s answer from `score_named`'s score, the logistic
//!   function written as it is there, the exponential the C library's as Python's `math.exp`.
//! * `learn_dense`: Rosenblatt's perceptron over the rows of a dense matrix in order, each row
//!   scored and decided in learn_one's fixed order (the twin: `model/dense_pass.py`,
//!   `learn_dense`, whose loop decides the same rows by margins with a bounded rounding error
//!   and then scores every row in that order).
//! * `ewma_update`: the exponentially weighted mistake rate over a run of flags (the twin:
//!   `model/stats.py`, `RunningStats._update_ewma`), e ← (1 − α)·e, plus α at a mistake, flag by
//!   flag.
//! * `AvroReader` (`avro.rs`): an Avro payload read with its writer's schema, as fastavro reads
//!   it (the twin: `codec/avro.py`, `AvroDecoder`).

mod avro;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

extern "C" {
    fn log(x: f64) -> f64; // the C library's, which math.log calls for a finite positive x
    fn exp(x: f64) -> f64; // the C library's, which math.exp calls for a finite x
}

// ------------------------------------------------------------------------------ reading

/// A JSON id as read: what the twin makes of it.
enum Id<'a> {
    Null,
    Int(i64),
    Float(f64),
    Text(&'a str),
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

/// The index of the first byte at or after `i` that is not an ASCII digit.
fn digits_end(s: &[u8], i: usize) -> usize {
    i + s[i.min(s.len())..].iter().take_while(|c| c.is_ascii_digit()).count()
}

/// [`digits_end`] where at least one digit starts at `i`; None (not a JSON number) otherwise.
fn some_digits(s: &[u8], i: usize) -> Option<usize> {
    let end = digits_end(s, i);
    (end > i).then_some(end)
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        if self.i < self.s.len() && self.s[self.i] == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// A string without escapes or control characters, as its raw bytes (valid UTF-8 is checked
    /// by the caller where the text is kept).
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        while self.i < self.s.len() {
            let c = self.s[self.i];
            if c == b'"' {
                let out = &self.s[start..self.i];
                self.i += 1;
                return Some(out);
            }
            if c == b'\\' || c < 0x20 {
                return None;
            }
            self.i += 1;
        }
        None
    }

    /// A JSON number (strict grammar): its text and whether it is an integer (no fraction, no
    /// exponent).
    fn number(&mut self) -> Option<(&'a [u8], bool)> {
        let s = self.s;
        let start = self.i;
        let mut i = self.i;
        if i < s.len() && s[i] == b'-' {
            i += 1;
        }
        if i >= s.len() {
            return None;
        }
        if s[i] == b'0' {
            i += 1;
        } else if s[i].is_ascii_digit() {
            i = digits_end(s, i);
        } else {
            return None;
        }
        let mut integer = true;
        if i < s.len() && s[i] == b'.' {
            i = some_digits(s, i + 1)?;
            integer = false;
        }
        if i < s.len() && (s[i] == b'e' || s[i] == b'E') {
            i += 1;
            if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
                i += 1;
            }
            i = some_digits(s, i)?;
            integer = false;
        }
        self.i = i;
        Some((&s[start..i], integer))
    }
}

/// An integer literal within int64 (and not "-0", which the readers behind may spell apart).
fn int64(text: &[u8]) -> Option<i64> {
    if text == b"-0" {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse::<i64>().ok()
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];

/// A feature at the reader's position as (numerator, denominator), whose quotient is the double
/// nearest the number, as the twin reads it; read in one pass with [`Reader::number`]'s
/// grammar. Clinger's fast path: a number with a fraction or an exponent whose significant
/// digits make an integer m <= 2^53 and whose decimal exponent k has |k| <= 22 is m × 10^k or
/// m / 10^-k, one correctly rounded operation on two exact doubles (the division left to the
/// caller, one pass over a batch that the compiler vectorizes). Any other number (an integer,
/// more digits, a larger exponent) is read by [`exact`] from its text; "-0" and an integer past
/// 64 bits are declined there.
fn feature_at(r: &mut Reader) -> Option<(f64, f64)> {
    let s = r.s;
    let start = r.i;
    let mut i = start;
    let negative = s.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let (mut m, mut digits, mut exp) = (0u64, 0u32, 0i32);
    let mut push = |d: u8| {
        if m != 0 || d != 0 {
            digits += 1;
            if digits <= 16 {
                m = m * 10 + u64::from(d);
            }
        }
    };
    match s.get(i) {
        Some(b'0') => i += 1,
        Some(c) if c.is_ascii_digit() => {
            while i < s.len() && s[i].is_ascii_digit() {
                push(s[i] - b'0');
                i += 1;
            }
        }
        _ => return None,
    }
    let mut integer = true;
    if s.get(i) == Some(&b'.') {
        integer = false;
        i += 1;
        let fraction = i;
        while i < s.len() && s[i].is_ascii_digit() {
            push(s[i] - b'0');
            exp -= 1;
            i += 1;
        }
        if i == fraction {
            return None; // a point without a digit after it: not a JSON number
        }
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        integer = false;
        i += 1;
        let minus = s.get(i) == Some(&b'-');
        if matches!(s.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let (digits_from, mut e) = (i, 0i32);
        while i < s.len() && s[i].is_ascii_digit() {
            e = e.saturating_mul(10).saturating_add(i32::from(s[i] - b'0'));
            i += 1;
        }
        if i == digits_from {
            return None; // an exponent without a digit
        }
        exp = exp.saturating_add(if minus { -e } else { e });
    }
    if integer || digits > 16 || m > (1u64 << 53) || !(-22..=22).contains(&exp) {
        r.i = start;
        let (text, integer) = r.number()?;
        return exact(text, integer).map(|v| (v, 1.0));
    }
    r.i = i;
    let v = if negative { -(m as f64) } else { m as f64 };
    Some(if exp >= 0 { (v * POW10[exp as usize], 1.0) } else { (v, POW10[(-exp) as usize]) })
}

/// [`feature_at`] for the common shape `-?digits.digits` with at most 18 digits in all and
/// nothing after the fraction that continues the number: the same (numerator, denominator),
/// the reader moved past it; None (the reader unmoved) for anything else, which
/// [`feature_at`] then reads. Every digit is accumulated, leading zeros included, so m is the
/// same integer as there, and m <= 2^53 holds exactly when it holds there (a larger m has
/// more than 16 significant digits).
#[inline(always)]
fn plain_decimal(r: &mut Reader) -> Option<(f64, f64)> {
    let s = r.s;
    let mut i = r.i;
    let negative = s.get(i) == Some(&b'-');
    i += usize::from(negative);
    let start = i;
    let mut m = 0u64;
    i = accumulate(s, i, &mut m, start, 18)?;
    let whole = i - start;
    if whole == 0 || (whole > 1 && s[start] == b'0') || s.get(i) != Some(&b'.') {
        return None; // no digit, a leading zero, or no fraction
    }
    let fraction = i + 1;
    i = accumulate(s, fraction, &mut m, start, 19)?; // 18 digits and the point
    let scale = i - fraction;
    if scale == 0 || scale > 22 || m > (1u64 << 53) || matches!(s.get(i), Some(b'e' | b'E')) {
        return None;
    }
    r.i = i;
    let v = if negative { -(m as f64) } else { m as f64 };
    Some((v, POW10[scale]))
}

/// The ASCII digits of `s` from `i` accumulated into `m`; the index after them, or None once
/// more than `limit` bytes from `start` are taken (so m never overflows: 19 digits at most).
#[inline(always)]
fn accumulate(s: &[u8], mut i: usize, m: &mut u64, start: usize, limit: usize) -> Option<usize> {
    while let Some(&c) = s.get(i) {
        let d = c.wrapping_sub(b'0');
        if d >= 10 {
            break;
        }
        *m = *m * 10 + u64::from(d);
        i += 1;
        if i - start > limit {
            return None;
        }
    }
    Some(i)
}

fn exact(text: &[u8], integer: bool) -> Option<f64> {
    if integer {
        if text == b"-0" {
            return None;
        }
        if let Some(v) = int64(text) {
            return Some(v as f64);
        }
        let v: u64 = std::str::from_utf8(text).ok()?.parse().ok()?;
        return Some(v as f64);
    }
    let v: f64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    if v.is_finite() {
        Some(v)
    } else {
        None
    }
}

struct Labels<'a> {
    positive: Option<&'a [u8]>,
    negative: Option<&'a [u8]>,
}

impl Labels<'_> {
    /// The sign of a label token (0: null), or None where the token is not one this reader
    /// takes (the twin decides those).
    fn sign(&self, r: &mut Reader) -> Option<i8> {
        match r.peek()? {
            b'"' => {
                let text = r.plain_string()?;
                if Some(text) == self.positive {
                    Some(1)
                } else if Some(text) == self.negative {
                    Some(-1)
                } else {
                    None
                }
            }
            b't' => r.s[r.i..].starts_with(b"true").then(|| {
                r.i += 4;
                1
            }),
            b'f' => r.s[r.i..].starts_with(b"false").then(|| {
                r.i += 5;
                -1
            }),
            b'n' => r.s[r.i..].starts_with(b"null").then(|| {
                r.i += 4;
                0
            }),
            _ => {
                let (text, _) = r.number()?;
                match text {
                    b"1" | b"1.0" => Some(1),
                    b"0" | b"-0" | b"0.0" | b"-0.0" | b"-1" | b"-1.0" => Some(-1),
                    _ => None,
                }
            }
        }
    }
}

fn read_id<'a>(r: &mut Reader<'a>, max_id_chars: usize) -> Option<Id<'a>> {
    match r.peek()? {
        b'"' => {
            let text = std::str::from_utf8(r.plain_string()?).ok()?;
            if text.len() > max_id_chars && text.chars().count() > max_id_chars {
                return None;
            }
            Some(Id::Text(text))
        }
        b'n' => r.s[r.i..].starts_with(b"null").then(|| {
            r.i += 4;
            Id::Null
        }),
        _ => {
            let (text, integer) = r.number()?;
            if integer {
                int64(text).map(Id::Int)
            } else {
                let v: f64 = std::str::from_utf8(text).ok()?.parse().ok()?;
                v.is_finite().then_some(Id::Float(v))
            }
        }
    }
}

/// One record: its features appended to `xs`; its width, label and id.
fn read_record<'a>(
    value: &'a [u8], xs: &mut Vec<f64>, dens: &mut Vec<f64>, labels: &Labels, max_id_chars: usize,
) -> Option<(usize, i8, Id<'a>)> {
    let mut r = Reader { s: value, i: 0 };
    let (mut width, mut sign, mut id) = (None, None, None);
    r.ws();
    r.eat(b'{')?;
    loop {
        r.ws();
        let key = r.plain_string()?;
        r.ws();
        r.eat(b':')?;
        r.ws();
        match key {
            b"x" if width.is_none() => {
                r.eat(b'[')?;
                let before = xs.len();
                loop {
                    r.ws();
                    let (num, den) = match plain_decimal(&mut r) {
                        Some(pair) => pair,
                        None => feature_at(&mut r)?,
                    };
                    xs.push(num);
                    dens.push(den);
                    r.ws();
                    match r.peek()? {
                        b',' => r.i += 1,
                        b']' => {
                            r.i += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
                width = Some(xs.len() - before);
            }
            b"y" if sign.is_none() => sign = Some(labels.sign(&mut r)?),
            b"id" if id.is_none() => id = Some(read_id(&mut r, max_id_chars)?),
            _ => return None, // another member, or one given twice
        }
        r.ws();
        match r.peek()? {
            b',' => r.i += 1,
            b'}' => {
                r.i += 1;
                break;
            }
            _ => return None,
        }
    }
    r.ws();
    if r.i != value.len() {
        return None;
    }
    Some((width?, sign.unwrap_or(0), id.unwrap_or(Id::Null)))
}

/// ``values`` (a list of bytes) as (the n × d float64 matrix's bytes, d, labels, ids), or None
/// where any record is not a plain dense one this reader takes exactly (see the module), not
/// bytes (a null value) or longer than ``max_record_bytes``.
#[pyfunction]
#[pyo3(signature = (values, max_features, max_abs_value, max_id_chars, positive=None, negative=None, max_record_bytes=usize::MAX))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn read_dense<'py>(
    py: Python<'py>, values: &Bound<'py, PyList>, max_features: usize, max_abs_value: f64,
    max_id_chars: usize, positive: Option<&str>, negative: Option<&str>, max_record_bytes: usize,
) -> PyResult<Option<(Bound<'py, PyBytes>, usize, Bound<'py, PyList>, Bound<'py, PyList>)>> {
    let n = values.len();
    if n == 0 {
        return Ok(None);
    }
    let labels = Labels { positive: positive.map(str::as_bytes), negative: negative.map(str::as_bytes) };
    let mut xs: Vec<f64> = Vec::new();
    let mut dens: Vec<f64> = Vec::new();
    let mut signs: Vec<i8> = Vec::with_capacity(n);
    let ys = PyList::empty(py);
    let ids = PyList::empty(py);
    let mut width = 0usize;
    for (k, item) in values.iter().enumerate() {
        let Ok(bytes) = item.cast::<PyBytes>() else { return Ok(None) };
        let value = bytes.as_bytes();
        if value.len() > max_record_bytes {
            return Ok(None);
        }
        let Some((w, sign, id)) = read_record(value, &mut xs, &mut dens, &labels, max_id_chars) else {
            return Ok(None);
        };
        if k == 0 {
            if w == 0 || w > max_features {
                return Ok(None);
            }
            width = w;
            xs.reserve(width * (n - 1));
            dens.reserve(width * (n - 1));
        } else if w != width {
            return Ok(None);
        }
        signs.push(sign);
        match id {
            Id::Null => ids.append(py.None())?,
            Id::Int(v) => ids.append(v)?,
            Id::Float(v) => ids.append(v)?,
            Id::Text(t) => ids.append(t)?,
        }
    }
    for (x, d) in xs.iter_mut().zip(&dens) {
        *x /= *d; // x / 1.0 is x, -0.0 included
    }
    if !xs.iter().all(|v| v.abs() <= max_abs_value) {
        return Ok(None);
    }
    for s in signs {
        ys.append(s)?;
    }
    let matrix = PyBytes::new_with(py, xs.len() * 8, |buf| {
        for (chunk, v) in buf.chunks_exact_mut(8).zip(&xs) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        Ok(())
    })?;
    Ok(Some((matrix, width, ys, ids)))
}

// ------------------------------------------------------------------------------ writing

/// ``s`` as a JSON string, as msgspec writes it: ``"`` and ``\`` escaped, \b \t \n \f \r by
/// their short escapes, other control characters as \u00xx; everything else as it is.
fn push_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        let short = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x08 => b'b',
            0x0c => b'f',
            0..=0x1f => b'u',
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.push(b'\\');
        out.push(short);
        if short == b'u' {
            out.extend_from_slice(&[b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A float as msgspec writes it: the shortest digits that read back to it, in positional form
/// for a decimal exponent in [-5, 16) ("0.00001", "1234.5", "1.0"), else as "d.ddde±x" without
/// a plus sign or padding ("1e16", "1.5e-7"); NaN and ±inf as null.
fn push_float(out: &mut Vec<u8>, v: f64, buf: &mut ryu::Buffer) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() { b"-0.0" } else { b"0.0" });
        return;
    }
    // the shortest digits from ryu's text, whatever its layout: digits and exponent apart
    let text = buf.format_finite(v).as_bytes();
    let (negative, text) = if text[0] == b'-' { (true, &text[1..]) } else { (false, text) };
    let (mantissa, exp) = match text.iter().position(|&c| c == b'e' || c == b'E') {
        Some(e) => (&text[..e], std::str::from_utf8(&text[e + 1..]).unwrap().parse::<i32>().unwrap()),
        None => (text, 0),
    };
    let point = mantissa.iter().position(|&c| c == b'.').unwrap_or(mantissa.len()) as i32;
    let mut store = [0u8; 40];
    let mut len = 0;
    for &c in mantissa {
        if c != b'.' {
            store[len] = c;
            len += 1;
        }
    }
    let lead = store[..len].iter().take_while(|&&c| c == b'0').count();
    let mut end = len;
    while end > lead && store[end - 1] == b'0' {
        end -= 1;
    }
    let digits = &store[lead..end];
    // v = 0.d1d2... × 10^(point - lead + exp); its scientific exponent is one less
    let e = point - lead as i32 + exp - 1;
    if negative {
        out.push(b'-');
    }
    let nd = digits.len() as i32;
    if (-5..16).contains(&e) {
        if e >= 0 {
            let int_len = (e + 1) as usize;
            if digits.len() <= int_len {
                out.extend_from_slice(digits);
                out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
                out.extend_from_slice(b".0");
            } else {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..]);
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-e - 1) as usize));
            out.extend_from_slice(digits);
        }
    } else {
        out.push(digits[0]);
        if nd > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        push_int(out, e as i64);
    }
}

fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_int(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

/// A record's key as JSON text: UTF-8, invalid bytes as Python's "backslashreplace" writes them.
fn push_key(out: &mut Vec<u8>, key: &Bound<PyAny>) -> PyResult<()> {
    if key.is_none() {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    let bytes = key.cast::<PyBytes>()?.as_bytes();
    match std::str::from_utf8(bytes) {
        Ok(text) => push_string(out, text),
        Err(_) => {
            let text = key.call_method1("decode", ("utf-8", "backslashreplace"))?;
            push_string(out, text.cast::<PyString>()?.to_str()?);
        }
    }
    Ok(())
}

fn push_scalar(out: &mut Vec<u8>, v: &Bound<PyAny>, buf: &mut ryu::Buffer) -> PyResult<()> {
    if v.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(b) = v.cast::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if v.is_instance_of::<PyInt>() {
        match v.extract::<i64>() {
            Ok(i) => push_int(out, i),
            Err(_) => push_u64(out, v.extract::<u64>()?),
        }
    } else if let Ok(f) = v.cast::<PyFloat>() {
        push_float(out, f.value(), buf);
    } else if let Ok(s) = v.cast::<PyString>() {
        push_string(out, s.to_str()?);
    } else {
        return Err(PyTypeError::new_err("an id is None, a number or a string"));
    }
    Ok(())
}

fn column<T: pyo3::buffer::Element + Copy>(py: Python, b: &PyBuffer<T>, n: usize, what: &str) -> PyResult<Vec<T>> {
    let v = b.to_vec(py)?;
    if v.len() != n {
        return Err(PyTypeError::new_err(format!("{what}: {} values for {n} rows", v.len())));
    }
    Ok(v)
}

/// The prediction record of each row, as ``encode_prediction(prediction_record(...))`` writes
/// it; ``classes``: the names (negative, positive) for the ``class`` field, or None for none.
#[pyfunction]
#[pyo3(signature = (topic, partition, offsets, keys, ids, predictions, scores, labels, mistakes, margins, updates, classes=None))]
#[allow(clippy::too_many_arguments)]
fn encode_predictions<'py>(
    py: Python<'py>, topic: &str, partition: i64, offsets: PyBuffer<i64>, keys: &Bound<'py, PyList>,
    ids: &Bound<'py, PyList>, predictions: PyBuffer<i64>, scores: PyBuffer<f64>, labels: PyBuffer<i64>,
    mistakes: PyBuffer<u8>, margins: PyBuffer<f64>, updates: PyBuffer<i64>,
    classes: Option<(Option<String>, Option<String>)>,
) -> PyResult<Bound<'py, PyList>> {
    let n = keys.len();
    if ids.len() != n {
        return Err(PyTypeError::new_err("keys and ids differ in length"));
    }
    let offsets = column(py, &offsets, n, "offsets")?;
    let predictions = column(py, &predictions, n, "predictions")?;
    let scores = column(py, &scores, n, "scores")?;
    let labels = column(py, &labels, n, "labels")?;
    let mistakes = column(py, &mistakes, n, "mistakes")?;
    let margins = column(py, &margins, n, "margins")?;
    let updates = column(py, &updates, n, "updates")?;
    let mut head = Vec::new();
    head.extend_from_slice(b"{\"topic\":");
    push_string(&mut head, topic);
    head.extend_from_slice(b",\"partition\":");
    push_int(&mut head, partition);
    head.extend_from_slice(b",\"offset\":");
    let names: Option<[Vec<u8>; 2]> = classes.map(|(neg, pos)| {
        [neg, pos].map(|name| {
            let mut text = Vec::new();
            match name {
                Some(s) => push_string(&mut text, &s),
                None => text.extend_from_slice(b"null"),
            }
            text
        })
    });
    let out = PyList::empty(py);
    let mut buf = ryu::Buffer::new();
    let mut rec: Vec<u8> = Vec::with_capacity(256);
    for k in 0..n {
        rec.clear();
        rec.extend_from_slice(&head);
        push_int(&mut rec, offsets[k]);
        rec.extend_from_slice(b",\"key\":");
        push_key(&mut rec, &keys.get_item(k)?)?;
        rec.extend_from_slice(b",\"id\":");
        push_scalar(&mut rec, &ids.get_item(k)?, &mut buf)?;
        rec.extend_from_slice(b",\"prediction\":");
        push_int(&mut rec, predictions[k]);
        rec.extend_from_slice(b",\"score\":");
        push_float(&mut rec, scores[k], &mut buf);
        let label = labels[k];
        if label != 0 {
            rec.extend_from_slice(b",\"label\":");
            push_int(&mut rec, label);
            rec.extend_from_slice(if mistakes[k] != 0 { b",\"mistake\":true,\"margin\":" } else {
                b",\"mistake\":false,\"margin\":"
            });
            push_float(&mut rec, margins[k], &mut buf); // NaN: null
        } else {
            rec.extend_from_slice(b",\"label\":null,\"mistake\":null,\"margin\":null");
        }
        rec.extend_from_slice(b",\"updates\":");
        push_int(&mut rec, updates[k]);
        if let Some(names) = &names {
            rec.extend_from_slice(b",\"class\":");
            rec.extend_from_slice(&names[(predictions[k] > 0) as usize]);
        }
        rec.push(b'}');
        out.append(PyBytes::new(py, &rec))?;
    }
    Ok(out)
}

// ------------------------------------------------------------------------------ ADWIN

/// ADWIN's window and counters, as `model/drift.py`'s `Adwin` holds them.
struct Adwin {
    delta: f64,
    clock: i64,
    max_buckets: usize,
    min_window_length: f64,
    grace_period: f64,
    total: f64,
    variance: f64,
    width: f64,
    tick: i64,
    detected: bool,
    split: Option<[f64; 4]>,
    levels: Vec<(Vec<f64>, Vec<f64>)>,
}

impl Adwin {
    fn fresh(&mut self) {
        self.total = 0.0;
        self.variance = 0.0;
        self.width = 0.0;
        self.tick = 0;
        self.levels = vec![(Vec::new(), Vec::new())];
    }

    fn merge(&mut self, mut level: usize) {
        while self.levels[level].0.len() == self.max_buckets + 1 {
            let n = (1u64 << level) as f64;
            let (t0, t1, v0, v1) = {
                let (t, v) = &self.levels[level];
                (t[0], t[1], v[0], v[1])
            };
            let (mu1, mu2) = (t0 / n, t1 / n);
            let total12 = t0 + t1;
            let variance12 = v0 + v1 + n * 0.5 * (mu1 - mu2) * (mu1 - mu2);
            let (t, v) = &mut self.levels[level];
            t.drain(..2);
            v.drain(..2);
            if level + 1 == self.levels.len() {
                self.levels.push((Vec::new(), Vec::new()));
            }
            self.levels[level + 1].0.push(total12);
            self.levels[level + 1].1.push(variance12);
            level += 1;
        }
    }

    fn drop_oldest(&mut self) {
        let last = self.levels.len() - 1;
        let n = (1u64 << last) as f64;
        let (u, v) = {
            let (t, v) = &mut self.levels[last];
            (t.remove(0), v.remove(0))
        };
        let mu = u / n;
        self.width -= n;
        self.total -= u;
        let mu_window = self.total / self.width;
        self.variance -= v + n * self.width * (mu - mu_window) * (mu - mu_window) / (n + self.width);
        if self.levels[last].0.is_empty() {
            self.levels.pop();
        }
    }

    fn cut(&self, n0: f64, n1: f64, delta_mean: f64) -> f64 {
        let lmin = self.min_window_length;
        let delta_prime = unsafe { log(2.0 * log(self.width) / self.delta) };
        let m_recip = 1.0 / (n0 - lmin + 1.0) + 1.0 / (n1 - lmin + 1.0);
        let epsilon = (2.0 * m_recip * (self.variance / self.width) * delta_prime).sqrt()
            + 2.0 / 3.0 * delta_prime * m_recip;
        delta_mean.abs() - epsilon
    }

    fn best_split(&self) -> [f64; 4] {
        let lmin = self.min_window_length;
        let (mut best, mut out) = (f64::NEG_INFINITY, [0.0; 4]);
        let (mut n0, mut n1, mut u0, mut u1) = (0.0, self.width, 0.0, self.total);
        for level in (0..self.levels.len()).rev() {
            let size = (1u64 << level) as f64;
            for &t in &self.levels[level].0 {
                n0 += size;
                n1 -= size;
                u0 += t;
                u1 -= t;
                if n1 >= lmin && n0 >= lmin {
                    let excess = self.cut(n0, n1, u0 / n0 - u1 / n1);
                    if excess > best {
                        best = excess;
                        out = [n0, u0, n1, u1];
                    }
                }
            }
        }
        out
    }

    fn detect(&mut self) -> bool {
        let (mut changed, mut again) = (false, true);
        let lmin = self.min_window_length;
        while again {
            again = false;
            let width = self.width;
            let delta_prime = unsafe { log(2.0 * log(width) / self.delta) };
            let spread = self.variance / width;
            let linear = 2.0 / 3.0 * delta_prime;
            let (mut n0, mut n1, mut u0, mut u1) = (0.0, width, 0.0, self.total);
            'levels: for level in (0..self.levels.len()).rev() {
                let size = (1u64 << level) as f64;
                let count = self.levels[level].0.len();
                let end = if level > 0 { count } else { count.saturating_sub(1) };
                for j in 0..end {
                    let t = self.levels[level].0[j];
                    n0 += size;
                    n1 -= size;
                    u0 += t;
                    u1 -= t;
                    if n1 >= lmin && n0 >= lmin {
                        let m = 1.0 / (n0 - lmin + 1.0) + 1.0 / (n1 - lmin + 1.0);
                        if (u0 / n0 - u1 / n1).abs() > (2.0 * m * spread * delta_prime).sqrt() + linear * m {
                            if !changed {
                                self.split = Some(self.best_split());
                            }
                            changed = true;
                            again = true;
                            if self.width > 0.0 {
                                self.drop_oldest();
                            }
                            break 'levels;
                        }
                    }
                }
            }
        }
        changed
    }

    /// `Adwin.update_many`: the positions of the values at which a change is signalled.
    fn update_many(&mut self, xs: &[f64]) -> Vec<(usize, [f64; 4])> {
        let mut out = Vec::new();
        let full = self.max_buckets + 1;
        let clock = self.clock;
        let (mut i, n) = (0usize, xs.len());
        while i < n {
            if self.detected {
                self.fresh();
                self.detected = false;
            }
            let stop = n.min(i + (clock - self.tick % clock) as usize);
            for &value in &xs[i..stop] {
                self.levels[0].0.push(value);
                self.levels[0].1.push(0.0);
                let before = self.width;
                self.width = before + 1.0;
                if before > 0.0 {
                    let d = value - self.total / before;
                    self.variance += before * d * d / self.width;
                } else {
                    self.variance += 0.0;
                }
                self.total += value;
                if self.levels[0].0.len() == full {
                    let (a, b, va, vb) = {
                        let (t, v) = &self.levels[0];
                        (t[0], t[1], v[0], v[1])
                    };
                    self.levels[0].0.drain(..2);
                    self.levels[0].1.drain(..2);
                    if self.levels.len() == 1 {
                        self.levels.push((Vec::new(), Vec::new()));
                    }
                    self.levels[1].0.push(a + b);
                    self.levels[1].1.push(va + vb + 1.0 * 0.5 * (a - b) * (a - b));
                    if self.levels[1].0.len() == full {
                        self.merge(1);
                    }
                }
            }
            self.tick += (stop - i) as i64;
            i = stop;
            if self.tick % clock == 0 && self.width > self.grace_period && self.detect() {
                self.detected = true;
                out.push((stop - 1, self.split.unwrap_or([0.0; 4])));
            }
        }
        out
    }
}

fn floats(list: &Bound<PyAny>) -> PyResult<Vec<f64>> {
    list.extract::<Vec<f64>>()
}

/// `Adwin.update_many` on the state of ``adwin`` (a `model/drift.py` `Adwin`, read and written
/// back: total, variance, width, _tick, drift_detected, split, _levels): returns the
/// (position, (n0, total0, n1, total1)) of each value at which a change is signalled.
#[pyfunction]
fn adwin_update<'py>(
    py: Python<'py>, adwin: &Bound<'py, PyAny>, xs: Vec<f64>,
) -> PyResult<Vec<(usize, (f64, f64, f64, f64))>> {
    let levels_obj = adwin.getattr("_levels")?;
    let mut levels = Vec::new();
    for level in levels_obj.cast::<PyList>()?.iter() {
        let pair = level.cast::<PyTuple>()?;
        levels.push((floats(&pair.get_item(0)?)?, floats(&pair.get_item(1)?)?));
    }
    let split: Option<(f64, f64, f64, f64)> = adwin.getattr("split")?.extract()?;
    let mut a = Adwin {
        delta: adwin.getattr("delta")?.extract()?,
        clock: adwin.getattr("clock")?.extract()?,
        max_buckets: adwin.getattr("max_buckets")?.extract()?,
        min_window_length: adwin.getattr("min_window_length")?.extract::<i64>()? as f64,
        grace_period: adwin.getattr("grace_period")?.extract::<i64>()? as f64,
        total: adwin.getattr("total")?.extract()?,
        variance: adwin.getattr("variance")?.extract()?,
        width: adwin.getattr("width")?.extract()?,
        tick: adwin.getattr("_tick")?.extract()?,
        detected: adwin.getattr("drift_detected")?.extract()?,
        split: split.map(|(a, b, c, d)| [a, b, c, d]),
        levels,
    };
    let found = a.update_many(&xs);
    let out = PyList::empty(py);
    for (t, v) in &a.levels {
        out.append(PyTuple::new(py, [PyList::new(py, t)?, PyList::new(py, v)?])?)?;
    }
    adwin.setattr("_levels", out)?;
    adwin.setattr("total", a.total)?;
    adwin.setattr("variance", a.variance)?;
    adwin.setattr("width", a.width)?;
    adwin.setattr("_tick", a.tick)?;
    adwin.setattr("drift_detected", a.detected)?;
    adwin.setattr("split", a.split.map(|[a, b, c, d]| (a, b, c, d)))?;
    Ok(found.into_iter().map(|(i, [a, b, c, d])| (i, (a, b, c, d))).collect())
}

// ------------------------------------------------------------------------------ scoring

/// numpy's pairwise sum of `p` (`model/rowwise.py`, `pairwise`): fewer than 8 terms left to right
/// from -0.0; up to 128 in 8 running sums added as a tree, then the rest in order; beyond, the two
/// halves (the first a multiple of 8) summed so and added.
fn pairwise(p: &[f64]) -> f64 {
    let n = p.len();
    if n < 8 {
        let mut res = -0.0;
        for v in p {
            res += v;
        }
        return res;
    }
    if n <= 128 {
        let mut r = [p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]];
        let end = n - n % 8;
        let mut i = 8;
        while i < end {
            for j in 0..8 {
                r[j] += p[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for v in &p[end..] {
            res += v;
        }
        return res;
    }
    let mut half = n / 2;
    half -= half % 8;
    pairwise(&p[..half]) + pairwise(&p[half..])
}

/// A row's sum: its first term plus the rest's pairwise sum (0.0 for no term).
fn row_sum(p: &[f64]) -> f64 {
    match p.split_first() {
        None => 0.0,
        Some((first, rest)) => first + pairwise(rest),
    }
}

/// A feature value as Python multiplies a float by it: a float, a bool (0 or 1) or an integer
/// that converts exactly (at most 53 bits); None for anything else.
fn exact_value(v: &Bound<'_, PyAny>) -> Option<f64> {
    if let Ok(f) = v.cast_exact::<PyFloat>() {
        return Some(f.value());
    }
    if let Ok(b) = v.cast_exact::<PyBool>() {
        return Some(if b.is_true() { 1.0 } else { 0.0 });
    }
    if v.is_exact_instance_of::<PyInt>() {
        let i: i64 = v.extract().ok()?;
        if i.unsigned_abs() <= 1 << 53 {
            return Some(i as f64);
        }
    }
    None
}

/// A weight by name: the float `w` holds for `k`, None when it holds none (or not a float).
fn weight(w: &Bound<'_, PyDict>, k: &Bound<'_, PyAny>) -> Option<f64> {
    let found = w.get_item(k).ok()??;
    Some(found.cast_exact::<PyFloat>().ok()?.value())
}

#[pyfunction]
fn score_named(w: &Bound<'_, PyDict>, x: &Bound<'_, PyDict>, b: f64) -> Option<f64> {
    let mut p: Vec<f64> = Vec::with_capacity(x.len());
    for (k, v) in x.iter() {
        p.push(weight(w, &k)? * exact_value(&v)?);
    }
    let a = row_sum(&p) + b;
    a.is_finite().then_some(a)
}

/// `{negative: 1 - σ(s), positive: σ(s)}` of a dict row's score s (`score_named`), σ written as
/// `Perceptron.predict_proba_one` writes it; None where `score_named` declines the row.
#[pyfunction]
fn proba_named<'py>(
    py: Python<'py>, w: &Bound<'py, PyDict>, x: &Bound<'py, PyDict>, b: f64,
    negative: &Bound<'py, PyAny>, positive: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(s) = score_named(w, x, b) else { return Ok(None) };
    let p = if s >= 0.0 {
        1.0 / (1.0 + unsafe { exp(-s) })
    } else {
        let e = unsafe { exp(s) };
        e / (1.0 + e)
    };
    let out = PyDict::new(py);
    out.set_item(negative, 1.0 - p)?;
    out.set_item(positive, p)?;
    Ok(Some(out))
}

#[pyfunction]
fn score_pair(
    w: &Bound<'_, PyDict>, u: &Bound<'_, PyDict>, x: &Bound<'_, PyDict>, b: f64, ub: f64,
) -> Option<(f64, f64)> {
    let n = x.len();
    let (mut p, mut q) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (k, v) in x.iter() {
        let v = exact_value(&v)?;
        p.push(weight(w, &k)? * v);
        q.push(weight(u, &k)? * v);
    }
    let (a, c) = (row_sum(&p) + b, row_sum(&q) + ub);
    (a.is_finite() && c.is_finite()).then_some((a, c))
}

/// The sum ``np.add.reduce`` gives of `p` as an array (a row of ``.sum(axis=1)`` too):
/// 0.0 plus the pairwise sum (`model/rowwise.py`, `reduce_sum`).
fn reduce_sum(p: &[f64]) -> f64 {
    0.0 + pairwise(p)
}

/// Rosenblatt's perceptron over the `n` rows of the C-ordered `n × d` matrix `x` in order
/// (`signs` −1/+1, 0 unlabeled), from θ = `w` and θ0 = `b`; `norm`, `norm_aug` are ‖θ‖ and
/// ‖[θ, θ0]‖ before the first row. Each row's score is `(x * θ).sum() + θ0` with θ in effect
/// at it, numpy's order; a labeled row is a mistake when y·score ≤ 0 (the boundary counts),
/// and then θ += y x, θ0 += y (with an intercept), and the norms are summed again from θ as
/// `Perceptron.norms` sums them. Writes each row's score, mistake flag (0/1), ‖θ‖ and ‖[θ, θ0]‖
/// in effect to the four output buffers and θ after the rows to `w`; returns (θ0 after the rows,
/// the mistakes made).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn learn_dense(
    py: Python<'_>, x: PyBuffer<f64>, signs: PyBuffer<i8>, w: PyBuffer<f64>, b: f64, norm: f64,
    norm_aug: f64, fit_intercept: bool, scores: PyBuffer<f64>, mistakes: PyBuffer<u8>,
    theta_norm: PyBuffer<f64>, theta_norm_aug: PyBuffer<f64>,
) -> PyResult<(f64, usize)> {
    let n = signs.item_count();
    let d = w.item_count();
    if x.item_count() != n * d || !x.is_c_contiguous() {
        return Err(PyTypeError::new_err("x: not a C-ordered matrix of the signs' rows and θ's width"));
    }
    for (count, what) in [(scores.item_count(), "scores"), (mistakes.item_count(), "mistakes"),
                          (theta_norm.item_count(), "theta_norm"), (theta_norm_aug.item_count(), "theta_norm_aug")] {
        if count != n {
            return Err(PyTypeError::new_err(format!("{what}: {count} entries for {n} rows")));
        }
    }
    let xs = x.as_slice(py).ok_or_else(|| PyTypeError::new_err("x: not C-contiguous"))?;
    let ys = signs.to_vec(py)?;
    let mut theta = w.to_vec(py)?;
    let (mut s_out, mut f_out) = (vec![0.0f64; n], vec![0u8; n]);
    let (mut n_out, mut a_out) = (vec![0.0f64; n], vec![0.0f64; n]);
    let (mut b, mut norm, mut norm_aug, mut k) = (b, norm, norm_aug, 0usize);
    let mut p = vec![0.0f64; d];
    for i in 0..n {
        let row = &xs[i * d..(i + 1) * d];
        for j in 0..d {
            p[j] = row[j].get() * theta[j];
        }
        let score = reduce_sum(&p) + b;
        s_out[i] = score;
        n_out[i] = norm;
        a_out[i] = norm_aug;
        let y = ys[i];
        if y == 0 || !(f64::from(y) * score <= 0.0) {
            continue;
        }
        f_out[i] = 1;
        k += 1;
        if y > 0 {
            for j in 0..d {
                theta[j] += row[j].get();
            }
        } else {
            for j in 0..d {
                theta[j] -= row[j].get();
            }
        }
        if fit_intercept {
            b += f64::from(y);
        }
        for j in 0..d {
            p[j] = theta[j] * theta[j];
        }
        let sq = reduce_sum(&p);
        norm = sq.sqrt();
        norm_aug = (sq + b * b).sqrt();
    }
    scores.copy_from_slice(py, &s_out)?;
    mistakes.copy_from_slice(py, &f_out)?;
    theta_norm.copy_from_slice(py, &n_out)?;
    theta_norm_aug.copy_from_slice(py, &a_out)?;
    if k > 0 {
        w.copy_from_slice(py, &theta)?;
    }
    Ok((b, k))
}

/// e ← b·e + a at each set flag and e ← e·b at each clear one, in order (a = α, b = 1 − α); a
/// first e of None starts at the first flag (1.0 or 0.0). None for no flag and no e.
#[pyfunction]
fn ewma_update(py: Python<'_>, flags: PyBuffer<u8>, e: Option<f64>, a: f64, b: f64) -> PyResult<Option<f64>> {
    let flags = flags.as_slice(py).ok_or_else(|| PyTypeError::new_err("flags: not C-contiguous"))?;
    let (mut e, rest) = match (e, flags.split_first()) {
        (Some(e), _) => (e, flags),
        (None, Some((first, rest))) => (if first.get() != 0 { 1.0 } else { 0.0 }, rest),
        (None, None) => return Ok(None),
    };
    for f in rest {
        e = if f.get() != 0 { b * e + a } else { e * b };
    }
    Ok(Some(e))
}

#[pymodule]
fn stream_perceptron_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(score_named, m)?)?;
    m.add_function(wrap_pyfunction!(score_pair, m)?)?;
    m.add_function(wrap_pyfunction!(proba_named, m)?)?;
    m.add_function(wrap_pyfunction!(read_dense, m)?)?;
    m.add_function(wrap_pyfunction!(encode_predictions, m)?)?;
    m.add_function(wrap_pyfunction!(adwin_update, m)?)?;
    m.add_function(wrap_pyfunction!(learn_dense, m)?)?;
    m.add_function(wrap_pyfunction!(ewma_update, m)?)?;
    m.add_class::<avro::AvroReader>()?;
    Ok(())
}
