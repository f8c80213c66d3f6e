// Test guest (tests/languages.rs). `{"mode": ...}`:
//   throw   - push throws an Error with a message naming the batch
//   clock   - open reads Date.now()
//   date    - open constructs new Date() (the current time)
//   random  - finish emits 4 Math.random() values as column `r`
//   log     - open writes a line with console.log
//   side    - open reads side input `customers`; finish emits one row: the
//             side inputs' names, its rows and its first `customer`
import { Batch, DataType, Field, Schema, column, exportTransform } from 'idem-guest';

// A top-level name the SDK's `side-inputs` export must not clash with.
const sideInputs = 'a project binding named like the export';

class Probe {
  open(ctx) {
    this.mode = ctx.paramString('mode') ?? 'random';
    if (this.mode === 'clock') this.t = Date.now();
    if (this.mode === 'date') this.t = new Date().getTime();
    if (this.mode === 'log') console.log(`hello from a JavaScript guest (${sideInputs})`);
    if (this.mode === 'side') {
      const b = ctx.sideInput('customers');
      this.side = [ctx.sideInputNames().join(','), b.numRows, b.column('customer').get(0)];
    }
  }

  push(batch) {
    if (this.mode === 'throw') throw new Error(`boom at a batch of ${batch.numRows} rows`);
    return undefined;
  }

  finish() {
    if (this.mode === 'side') {
      const [names, rows, first] = this.side;
      const schema = new Schema([
        new Field('names', DataType.Utf8, false),
        new Field('rows', DataType.Float64, false),
        new Field('first', DataType.Utf8, false),
      ]);
      return new Batch(schema, [column(DataType.Utf8, [names]), column(DataType.Float64, [rows]), column(DataType.Utf8, [first])]);
    }
    if (this.mode !== 'random') return undefined;
    const values = new Float64Array(4);
    for (let i = 0; i < values.length; i++) values[i] = Math.random();
    return new Batch(new Schema([new Field('r', DataType.Float64, false)]), [column(DataType.Float64, values)]);
  }
}

export const transform = exportTransform(Probe);
