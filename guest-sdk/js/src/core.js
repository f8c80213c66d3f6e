// Everything of the SDK that runs anywhere (no host import): types, columns,
// batches, kernels, IPC, context, logging.

export { DataType, Field, Schema, Kind } from './types.js';
export {
  Column, PrimitiveColumn, BoolColumn, BinaryColumn,
  column, repeatString, nulls, emptyColumn, countNulls,
} from './column.js';
export { Batch } from './batch.js';
export {
  filter, filterColumn, take, takeColumn, concat, derive, arith, compare, markNulls,
  compareBytes, compareUtf8, sortIndices, maskRuns, StringKeys,
} from './kernels.js';
export { readStream, readSchema, writeStream, encodeOutput } from './ipc.js';
export { Context } from './context.js';
export { IdemError, describeError } from './error.js';
export { log, setLogSink } from './log.js';
export { exportTransform } from './export.js';
export { checkParams } from './params.js';
