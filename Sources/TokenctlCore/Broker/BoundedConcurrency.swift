/// Work over many profiles (`refresh --all`, `status --all`) with at most `limit` in flight: a
/// sliding window, the next item starting as soon as one ends, and the results in the order of
/// the items.
///
/// Results are appended as they arrive and sorted once at the end: `status --all` once wrote
/// each result into a preallocated array by index from the task group, which trapped in release
/// builds (SIGILL, exit 132, commit 63a2010); the end-to-end test that runs both commands over
/// 20 profiles in the release build guards it.
enum BoundedConcurrency {
    static func map<Item: Sendable, Output: Sendable>(
        _ items: [Item], limit: Int, _ body: @escaping @Sendable (Item) async -> Output
    ) async -> [Output] {
        await withTaskGroup(of: (index: Int, output: Output).self) { group in
            var next = 0
            func startNext() {
                guard next < items.count else { return }
                let (index, item) = (next, items[next])
                next += 1
                group.addTask { (index, await body(item)) }
            }
            for _ in 0..<max(1, limit) { startNext() }
            var finished: [(index: Int, output: Output)] = []
            finished.reserveCapacity(items.count)
            while let result = await group.next() {
                finished.append(result)
                startNext()
            }
            return finished.sorted { $0.index < $1.index }.map(\.output)
        }
    }
}
