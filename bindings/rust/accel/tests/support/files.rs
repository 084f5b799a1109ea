//! Writers for the file formats the datasets read: .npy (version 1.0) and .safetensors, little-endian.
use std::path::Path;

/// A float32 .npy array of `shape`.
pub fn write_npy_f32(path: &Path, shape: &[usize], values: &[f32]) {
    let shape_text: Vec<String> = shape.iter().map(usize::to_string).collect();
    let trailing_comma = if shape.len() == 1 { "," } else { "" };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}{}), }}", shape_text.join(", "), trailing_comma);
    // Magic (6), version (2) and length (2), then the header padded so that the data starts 64-aligned.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    values.iter().for_each(|value| bytes.extend_from_slice(&value.to_le_bytes()));
    std::fs::write(path, bytes).expect("write .npy");
}

/// A .safetensors file with a float32 "x" [rows, 2] and an int64 "y" [rows].
pub fn write_safetensors(path: &Path, x: &[f32], y: &[i64]) {
    let rows = y.len();
    let x_bytes = x.len() * 4;
    let mut header = format!(
        "{{\"x\":{{\"dtype\":\"F32\",\"shape\":[{},2],\"data_offsets\":[0,{}]}},\"y\":{{\"dtype\":\"I64\",\"shape\":[{}],\"data_offsets\":[{},{}]}}}}",
        rows,
        x_bytes,
        rows,
        x_bytes,
        x_bytes + rows * 8
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    x.iter().for_each(|value| bytes.extend_from_slice(&value.to_le_bytes()));
    y.iter().for_each(|value| bytes.extend_from_slice(&value.to_le_bytes()));
    std::fs::write(path, bytes).expect("write .safetensors");
}
