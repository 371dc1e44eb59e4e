import Foundation
import Testing
import TokenctlCore
import TokenctlEssentials
import TokenctlTestSupport

/// `key create --tpm` against a software TPM (swtpm, started by each test through
/// Scripts/lib/swtpm.sh): the key is made inside the TPM, its blob is useless on another TPM,
/// `key show --format pem` prints only the public key, and an assertion it signs verifies with
/// its public JWK.
@Suite("End to end: client keys inside a TPM (swtpm)", .serialized)
struct TPMKeyTests {
    @Test("create --tpm: inside the TPM, blob 0600 in the state directory, nothing in the keyring, public PEM only")
    func createInTPM() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let sandbox = try Sandbox()
        let created = try sandbox.tokenctl(
            "--profile", "t1", "key", "create", "--tpm", "--certificate", "--common-name", "tpm-client",
            extraEnvironment: tpm.environment)
        #expect(created.status == 0, "\(created)")
        #expect(created.stderr.contains("inside the TPM"))
        let blobFile = sandbox.root + "/state/tokenctl/client-keys/t1.current.tpm.json"
        let attributes = try FileManager.default.attributesOfItem(atPath: blobFile)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let blob = try String(contentsOfFile: blobFile, encoding: .utf8)
        #expect(blob.contains("TSS2 PRIVATE KEY") && !blob.contains("BEGIN PRIVATE KEY"))
        #expect(try KeyCommandTests.storedKey(sandbox, profile: "t1") == nil, "a TPM key is not in the keyring")

        let pem = try sandbox.tokenctl(
            "--profile", "t1", "key", "show", "--format", "pem", extraEnvironment: tpm.environment)
        #expect(pem.status == 0, "\(pem)")
        #expect(pem.stdout.hasPrefix("-----BEGIN PUBLIC KEY-----") && !pem.stdout.contains("PRIVATE"))
        let certificate = try sandbox.tokenctl(
            "--profile", "t1", "key", "show", "--format", "certificate", extraEnvironment: tpm.environment)
        let facts = try KeyCommandTests.openssl(
            ["x509", "-noout", "-subject", "-pubkey"], stdin: certificate.stdout, in: sandbox.root)
        #expect(facts.stdout.contains("subject=CN = tpm-client") && facts.stdout.contains(pem.stdout))
        let summary = try sandbox.tokenctl("--profile", "t1", "key", "show", extraEnvironment: tpm.environment)
        #expect(summary.stdout.contains("inside the TPM"), "\(summary)")
        // doctor names the key and the TPM it is in.
        try FileManager.default.createDirectory(
            atPath: sandbox.root + "/config/tokenctl/profiles", withIntermediateDirectories: true)
        try "issuer = http://127.0.0.1:9/\nclient_id = tpm-client\ntoken_endpoint = http://127.0.0.1:9/token\n"
            .write(toFile: sandbox.profileFile("t1"), atomically: true, encoding: .utf8)
        let doctor = try sandbox.tokenctl("doctor", "--timeout", "5", extraEnvironment: tpm.environment)
        #expect(
            doctor.stdout.contains("client key") && doctor.stdout.contains("inside the TPM (\(tpm.tcti))"),
            "\(doctor)")
        // The provider flushed what it loaded: nothing left in a TPM without a resource manager.
        #expect(try tpm.transients().isEmpty)

        // Another TPM (another machine) cannot use the blob: 69, with how to get access.
        let other = try SoftwareTPM()
        defer { other.stop() }
        let elsewhere = try sandbox.tokenctl(
            "--profile", "t1", "key", "show", "--format", "pem", extraEnvironment: other.environment)
        #expect(elsewhere.status == ExitStatus.unavailable.rawValue, "\(elsewhere)")
        #expect(elsewhere.stderr.contains("TPM"))
        let signedElsewhere = try sandbox.tokenctl(
            "--profile", "t1", "key", "rotate", extraEnvironment: other.environment)
        #expect(signedElsewhere.status == ExitStatus.unavailable.rawValue, "\(signedElsewhere)")
    }

    @Test("no TPM at the TCTI: create --tpm exits 69 and says how to get access")
    func noTPM() throws {
        let sandbox = try Sandbox()
        let result = try sandbox.tokenctl(
            "--profile", "t2", "key", "create", "--tpm",
            extraEnvironment: ["TPM2OPENSSL_TCTI": "swtpm:path=/nonexistent/tpm.sock"])
        #expect(result.status == ExitStatus.unavailable.rawValue, "\(result)")
        #expect(result.stderr.contains("tss"), "\(result)")
    }

    /// The tpm2 provider reads TPM2OPENSSL_TCTI from the process's environment once, when
    /// tokenctl first loads it: the signing runs in a test process of its own, started with it
    /// (`signsInTPMInChild`), so that no test changes this process's environment.
    @Test(
        "a TPM key signs ES256 and RS256 assertions that verify with its public JWK; for TLS an EC one loads, an RSA one is 78"
    )
    func signsInTPM() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2OPENSSL_TCTI"] = tpm.tcti
        environment[Self.childSwitch] = "1"
        let testProcess = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = try runProgram(
            testProcess, ["--testing-library", "swift-testing", "--filter", "signsInTPMInChild"],
            environment: environment)
        #expect(child.status == 0, "\(child)")
        #expect((child.stdout + child.stderr).contains("Test run with 1 test"), "the child ran it: \(child)")
        #expect(try tpm.transients().isEmpty)
    }

    /// Set in the environment of `signsInTPM`'s child process only.
    static let childSwitch = "TOKENCTL_TEST_TPM_SIGNING_CHILD"

    @Test(
        "(the child process of the test above) a TPM key signs, in this process, assertions that verify",
        .enabled(if: ProcessInfo.processInfo.environment[childSwitch] != nil))
    func signsInTPMInChild() throws {
        let directory = NSTemporaryDirectory() + "tokenctl-tpm-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for kind in ClientKey.Kind.allCases {
            let key = try ClientKey.generate(kind, location: .tpm(blobFile: directory + "/blob"), now: Date())
            #expect(key.isTPM)
            #expect(key.algorithms == (kind == .ec ? ["ES256"] : ["RS256"]))
            let stored = String(decoding: key.stored, as: UTF8.self)
            #expect(stored.contains("TSS2 PRIVATE KEY") && !stored.contains("BEGIN PRIVATE KEY"))
            let again = try ClientKey(stored: key.stored, location: .tpm(blobFile: directory + "/blob"))
            #expect(again.thumbprint == key.thumbprint)
            #expect(!again.publicKeyPEM.contains("PRIVATE"))
            let jwk = try #require(JSONValue.parseObject(Array(key.registeredJWK.utf8)))
            let assertion = try ClientAssertion.make(
                clientID: "tpm-machine", audience: "https://idp.example/token", signer: again, serverAlgorithms: nil,
                now: Date())
            let verified = try JWTVerifier.verify(assertion, keys: JSONWebKeySet(keys: [JSONWebKey(object: jwk)]))
            #expect(verified.algorithm.rawValue == key.algorithms[0])
            #expect(verified.keyID == key.thumbprint)
            #expect(verified.claims["iss"] == .string("tpm-machine"))

            // mTLS: an EC key is loaded for libssl; RSA cannot sign TLS 1.3's RSA-PSS there (78).
            var withCertificate = again
            try withCertificate.attach(certificatePEM: try again.selfSignedCertificate(commonName: "tpm-machine"))
            let certificate = try #require(withCertificate.certificate)
            #expect(certificate.privateKeyPEM == nil, "no PEM of a key inside the TPM")
            do {
                let loaded = try certificate.loadedForTLS()
                guard case .loaded = loaded.privateKey else {
                    Issue.record("not loaded: \(loaded)")
                    continue
                }
                #expect(kind == .ec, "an RSA key inside the TPM was accepted for TLS")
            } catch {
                #expect(kind == .rsa && error.kind == .configuration, "\(error)")
            }
        }
    }
}
