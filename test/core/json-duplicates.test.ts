import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { firstDuplicateName } from "../../src/core/json-duplicates.js";

describe("firstDuplicateName", () => {
  it("finds a name said twice in one object, at any depth, also when escapes spell it otherwise", () => {
    assert.equal(firstDuplicateName('{"a":1,"a":2}'), "a");
    assert.equal(firstDuplicateName('{"x":{"a":1,"b":[{"c":1}],"a":2}}'), "a");
    assert.equal(firstDuplicateName('[{"k":1},{"k":2,"k":3}]'), "k");
    assert.equal(firstDuplicateName('{"a":1,"\\u0061":2}'), "a");
    assert.equal(firstDuplicateName('{"\\"q":1,"\\"q":2}'), '"q');
  });

  it("is not fooled by names in sibling objects, by values that look like names, or by brackets inside strings", () => {
    assert.equal(firstDuplicateName('[{"k":1},{"k":2}]'), undefined);
    assert.equal(firstDuplicateName('{"a":"a","b":["a","a"],"c":{"a":1}}'), undefined);
    assert.equal(firstDuplicateName('{"a":"}{\\",\\"a\\":","b":"[,]"}'), undefined);
    assert.equal(firstDuplicateName('{"a":{},"b":[],"c":[[],{}],"d":{"a":{"a":1}}}'), undefined);
    assert.equal(firstDuplicateName('"just a string"'), undefined);
    assert.equal(firstDuplicateName("[1,2,{}]"), undefined);
  });

  it("property: JSON.stringify never repeats a name; repeating any member of any object is found", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value);
        assert.equal(firstDuplicateName(text), undefined);
        // Repeat the first member of the outermost object, if there is one.
        if (typeof value === "object" && value !== null && !Array.isArray(value)) {
          const [name, member] = Object.entries(value)[0] ?? [];
          if (name === undefined) return;
          const repeated = `${text.slice(0, -1)},${JSON.stringify(name)}:${JSON.stringify(member)}}`;
          JSON.parse(repeated); // still valid JSON: only the repetition is wrong with it
          assert.equal(firstDuplicateName(repeated), name);
        }
      }),
      { numRuns: 300 },
    );
  });
});
