"""The model room: an ONNX model read, its operators, their keys and workloads, and the tuned
copy written back."""
