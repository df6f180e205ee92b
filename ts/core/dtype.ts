/**
 * The element types of a logits buffer, by name: what `Logits.dtype`, `DeviceLogits` and the uploads
 * take (the native side's codes are `DTypeCode`).
 *
 * @internal
 * @module
 */

/**
 * Element type of a logits buffer.
 *
 * @category Logits kernels
 */
export type LogitsDType = 'float32' | 'bfloat16' | 'float16';
