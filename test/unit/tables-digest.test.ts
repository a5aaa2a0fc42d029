// Digest vectors from the contract (shared/spec/table-digest-vectors.json, copied verbatim so the
// repository's tests do not depend on files outside it). Every vector must pass.

import { describe, expect, it } from 'vitest';
import { canonicalRowText, digestOfCanonicalText, EMPTY_TABLE_DIGEST, prepareRow, rowDigest, tableDigest } from '../../src/tables/digest.js';
import { parseLosslessJson } from '../../src/tables/lossless-parse.js';
import { applyUpdatesToList, type ResolvedUpdate } from '../../src/tables/table-ops.js';

const VECTORS = {
  "algorithm": "row digest = sha256 over the UTF-8 bytes of Python json.dumps(row, sort_keys=True) with default separators (', ' and ': ') and ensure_ascii=True; floats as Python repr; urlsafe base64 of the 32 bytes, then '-'->'X', '_'->'Y', '=' stripped (43 chars). table digest = lowercase hex sha256 over the concatenation of the row digests in table order. row_json is the request text; canonical is the exact string hashed.",
  "rows": [
    {
      "row_json": "{\"input\":\"a\",\"expected\":1}",
      "canonical": "{\"expected\": 1, \"input\": \"a\"}",
      "row_digest": "kXb3frCztYE5t0ivZ0rJXmPkWD37tFxjlxbx3FCORtg"
    },
    {
      "row_json": "{\"input\":\"b\",\"expected\":2}",
      "canonical": "{\"expected\": 2, \"input\": \"b\"}",
      "row_digest": "NY09TAcoxBErBkpGH4YfhLzreGgBYDEP8PB5kHk2IRM"
    },
    {
      "row_json": "{}",
      "canonical": "{}",
      "row_digest": "RBNvo1WzZ4oRRq0W9XhknpT7T8If536DEMBg9hyqY4o"
    },
    {
      "row_json": "{\"id\":0}",
      "canonical": "{\"id\": 0}",
      "row_digest": "GFqMu4w3Xgmn2O4lYMQu0pze7IYNWmCPMmQYzjmeYvs"
    },
    {
      "row_json": "{\"x\":1.0}",
      "canonical": "{\"x\": 1.0}",
      "row_digest": "hXYo5CD9tT04YhwV9Lb3Yn20n4eGfwZO2DFpPCvifmA"
    },
    {
      "row_json": "{\"x\":1}",
      "canonical": "{\"x\": 1}",
      "row_digest": "YTYlqmU0Pbsbmr5qusZ3P1yRvWDT8vX34urmnh24sic"
    },
    {
      "row_json": "{\"x\":1e-05,\"y\":1e16,\"z\":-0.0,\"w\":0.1,\"v\":123456789012345678901234567890}",
      "canonical": "{\"v\": 123456789012345678901234567890, \"w\": 0.1, \"x\": 1e-05, \"y\": 1e+16, \"z\": -0.0}",
      "row_digest": "LXravYCL4fR7I7LH2etXqhff1g9uGc5JSAGXkezXxAY"
    },
    {
      "row_json": "{\"b\":{\"z\":1,\"a\":[{\"d\":2,\"c\":3}]},\"a\":null,\"c\":true,\"d\":false}",
      "canonical": "{\"a\": null, \"b\": {\"a\": [{\"c\": 3, \"d\": 2}], \"z\": 1}, \"c\": true, \"d\": false}",
      "row_digest": "5ByAnf4lmcUVIGr75yciCY4GqDX2jNMuo1c59KjBftA"
    },
    {
      "row_json": "{\"text\":\"h\\u00e9llo \\u4e16\\u754c \\ud83d\\ude00\",\"esc\":\"tab\\tquote\\\"slash/\"}",
      "canonical": "{\"esc\": \"tab\\tquote\\\"slash/\", \"text\": \"h\\u00e9llo \\u4e16\\u754c \\ud83d\\ude00\"}",
      "row_digest": "OnesR1tl7UvXH12OoIRUEY0BmL2BagDIXRuFTXJekXE"
    },
    {
      "row_json": "{\"raw_utf8\":\"h\u00e9llo \u4e16\u754c \ud83d\ude00\"}",
      "canonical": "{\"raw_utf8\": \"h\\u00e9llo \\u4e16\\u754c \\ud83d\\ude00\"}",
      "row_digest": "JXQfUGvjF0FxccOxEh2GYY75Uy4HNXWoiVoYzOuCqt0"
    },
    {
      "row_json": "{\"nested\":{\"list\":[1,2.5,\"three\",null,[]],\"empty\":{}}}",
      "canonical": "{\"nested\": {\"empty\": {}, \"list\": [1, 2.5, \"three\", null, []]}}",
      "row_digest": "glDrP9RAbfKzVeim7arlqPjXbSWrq1Vi8MhrVM3q0Jk"
    },
    {
      "row_json": "{\"big\":1.7976931348623157e308,\"small\":5e-324,\"f\":3.14159,\"g\":100.0,\"h\":1.5e300}",
      "canonical": "{\"big\": 1.7976931348623157e+308, \"f\": 3.14159, \"g\": 100.0, \"h\": 1.5e+300, \"small\": 5e-324}",
      "row_digest": "gRJD8dFUwe3R3u9JMLiaZzm4nUx7hb5nGI49efXX5FE"
    }
  ],
  "tables": [
    {
      "rows": [],
      "digest": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    },
    {
      "rows": [
        0,
        1
      ],
      "digest": "ee4a70b881838f452d35dd84f2af31ca3bfcdec42bcab9e1f41ebf21ff1951e9"
    },
    {
      "rows": [
        2
      ],
      "digest": "6d68cad243b602f608e213f64e57d12be761d1c8011e4455642a25a324f20631"
    },
    {
      "rows": [
        0,
        0,
        1
      ],
      "digest": "5e12263c434cae239657a86bd5e45ad5be3d9c2db4198e245d896b107dd3ad94"
    }
  ],
  "update_example": {
    "base_rows": [
      0,
      1
    ],
    "updates": [
      {
        "append": {
          "row": {
            "input": "c",
            "expected": 3
          }
        }
      },
      {
        "pop": {
          "index": 0
        }
      },
      {
        "insert": {
          "index": 1,
          "row": {
            "input": "d",
            "expected": 4
          }
        }
      }
    ],
    "result_digest": "1ae93bcff932f90f750c540046d88e6e8cb5f8edd07ddfd7ffa3e9beb13c0f75",
    "updated_row_digests": [
      "qPPpCY97ygrlLscxbFNWv66CA3ru1X2xgMCPfjc449g",
      "kXb3frCztYE5t0ivZ0rJXmPkWD37tFxjlxbx3FCORtg",
      "9cPSgg1wasAlMlPYbyOYaXzYkYuABtQj6fdh2Uqegew"
    ]
  }
} as const;

describe('row digest vectors', () => {
  for (const vector of VECTORS.rows) {
    it(`digests ${vector.row_json}`, () => {
      const row = parseLosslessJson(vector.row_json);
      expect(canonicalRowText(row)).toBe(vector.canonical);
      expect(rowDigest(row)).toBe(vector.row_digest);
      expect(digestOfCanonicalText(vector.canonical)).toBe(vector.row_digest);
    });
  }

  it('prepares a row for storage: its digest and its compact Python-style JSON, key order kept', () => {
    const row = parseLosslessJson('{"b":1.0,"a":"x y"}') as Record<string, unknown>;
    expect(prepareRow(row)).toEqual({ digest: rowDigest(row), valJson: '{"b":1.0,"a":"x y"}' });
  });

  it('distinguishes 1.0 from 1', () => {
    expect(rowDigest(parseLosslessJson('{"x":1.0}'))).not.toBe(rowDigest(parseLosslessJson('{"x":1}')));
  });
});

describe('table digest vectors', () => {
  const rowDigests = VECTORS.rows.map((r) => r.row_digest);
  for (const table of VECTORS.tables) {
    it(`table of rows [${table.rows.join(', ')}]`, () => {
      expect(tableDigest(table.rows.map((i) => rowDigests[i]))).toBe(table.digest);
    });
  }

  it('empty table digest constant', () => {
    expect(tableDigest([])).toBe(EMPTY_TABLE_DIGEST);
  });
});

describe('worked update example', () => {
  it('append, pop 0, insert 1 on [r0, r1]', () => {
    const example = VECTORS.update_example;
    const rowDigests = VECTORS.rows.map((r) => r.row_digest);
    const base = example.base_rows.map((i) => rowDigests[i]);
    const updates: ResolvedUpdate[] = example.updates.map((u) => {
      if ('append' in u) return { kind: 'append', rowDigest: rowDigest(u.append.row) };
      if ('pop' in u) return { kind: 'pop', index: u.pop.index };
      return { kind: 'insert', index: u.insert.index, rowDigest: rowDigest(u.insert.row) };
    });
    const result = applyUpdatesToList(base, updates);
    if (!result.ok) throw new Error(result.reason);
    expect(tableDigest(result.rowDigests)).toBe(example.result_digest);
    expect(result.updatedRowDigests).toEqual(example.updated_row_digests);
  });
});
