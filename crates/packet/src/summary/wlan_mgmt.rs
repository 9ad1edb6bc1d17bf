//! IEEE 802.11 management frame bodies as tcpdump 4.99's quiet mode prints them: the
//! fixed fields each subtype starts with, the SSID, supported rates and DS channel from
//! the information elements, reason and status codes by name, the WEP IV of a protected
//! frame. A body cut short (or an element that does not fit) ends in ` [|802.11]`.

use std::fmt::Write as _;

use super::discovery::print_char;
use super::{Bytes, Printer, Step};

/// The elements tcpdump shows: the first SSID, rates and DS channel seen, and whether a
/// challenge text came.
#[derive(Default)]
struct Elements {
    ssid: Option<Vec<u8>>,
    rates: Option<Vec<u8>>,
    channel: Option<u8>,
    challenge: bool,
}

impl Printer {
    /// The body of a management frame of subtype `subtype` (after the 24-byte header),
    /// `length` bytes on the wire; `src` is the transmitter's address.
    pub(super) fn wlan_mgmt(
        &mut self,
        subtype: u8,
        protected: bool,
        src: &str,
        body: Bytes<'_>,
        length: u32,
    ) -> Step {
        let length = length as usize;
        if protected {
            let iv = body.slice(0, 4)?;
            let iv = u32::from_le_bytes([iv[0], iv[1], iv[2], iv[3]]);
            let _ = write!(
                self.out,
                " IV:{:3x} Pad {:x} KeyID {:x}",
                iv & 0x00ff_ffff,
                (iv >> 24) & 0x3f,
                iv >> 30
            );
            return Ok(());
        }
        let le16 = |at: usize| -> Result<u16, &'static str> {
            Ok(u16::from_le_bytes([body.u8(at)?, body.u8(at + 1)?]))
        };
        // A fixed part of `n` bytes: captured and on the wire.
        let fixed = |n: usize| -> Step {
            body.slice(0, n)?;
            if length < n {
                return Err("802.11");
            }
            Ok(())
        };
        match subtype {
            // Association and reassociation requests, probe requests.
            0 | 2 | 4 => {
                let at = match subtype {
                    0 => 4,
                    2 => 10,
                    _ => 0,
                };
                fixed(at)?;
                let (elements, ok) = elements(body, at, length - at);
                self.ssid(&elements);
                if subtype == 2 {
                    let _ = write!(self.out, " AP : {}", body.mac(4, 6)?);
                } else {
                    self.rates(&elements);
                }
                ok
            }
            // Association and reassociation responses.
            1 | 3 => {
                fixed(6)?;
                let (capability, status, aid) = (le16(0)?, le16(2)?, le16(4)?);
                let (_, ok) = elements(body, 6, length - 6);
                let _ = write!(
                    self.out,
                    " AID({:x}) :{}: {}",
                    aid & 0x3fff,
                    if capability & 0x0010 != 0 { " PRIVACY " } else { "" },
                    STATUSES.get(usize::from(status)).copied().unwrap_or("n/a")
                );
                ok
            }
            // Probe responses and beacons.
            5 | 8 => {
                fixed(12)?;
                let capability = le16(10)?;
                let (elements, ok) = elements(body, 12, length - 12);
                self.ssid(&elements);
                self.rates(&elements);
                if subtype == 8 {
                    self.push(if capability & 0x0001 != 0 { " ESS" } else { " IBSS" });
                }
                if let Some(channel) = elements.channel {
                    let _ = write!(self.out, " CH: {channel}");
                }
                if capability & 0x0010 != 0 {
                    self.push(", PRIVACY");
                }
                ok
            }
            // Disassociation and deauthentication: the reason.
            10 | 12 => {
                fixed(2)?;
                let reason = REASONS.get(usize::from(le16(0)?)).copied().unwrap_or("Reserved");
                if subtype == 10 {
                    let _ = write!(self.out, ": {reason}");
                } else {
                    let _ = write!(self.out, " ({src}): {reason}");
                }
                Ok(())
            }
            11 => {
                fixed(6)?;
                let (algorithm, seq, status) = (le16(0)?, le16(2)?, le16(4)?);
                let (elements, ok) = elements(body, 6, length - 6);
                // tcpdump names the status of the odd-numbered frames of the exchange.
                let status = if seq % 2 == 1 {
                    STATUSES.get(usize::from(status)).copied().unwrap_or("n/a")
                } else {
                    ""
                };
                let name = ["Open System", "Shared Key", "EAP"]
                    .get(usize::from(algorithm))
                    .copied()
                    .unwrap_or("Reserved");
                if algorithm == 1 && (seq == 2 || seq == 3) && elements.challenge {
                    let _ = write!(self.out, " ({name})-{seq:x} [Challenge Text] {status}");
                } else {
                    let _ = write!(self.out, " ({name})-{seq:x}: {status}");
                }
                ok
            }
            13 => {
                fixed(2)?;
                let _ = write!(self.out, " ({src}): ");
                let (category, action) = (body.u8(0)?, body.u8(1)?);
                let _ = match category {
                    0 => write!(self.out, "Spectrum Management Act#{action}"),
                    1 => write!(self.out, "QoS Act#{action}"),
                    2 => write!(self.out, "DLS Act#{action}"),
                    3 => match action {
                        0 => write!(self.out, "BA ADDBA Request"),
                        1 => write!(self.out, "BA ADDBA Response"),
                        2 => write!(self.out, "BA DELBA"),
                        _ => write!(self.out, "BA Act#{action}"),
                    },
                    127 => write!(self.out, "Vendor Act#{action}"),
                    _ => write!(self.out, "Reserved({category}) Act#{action}"),
                };
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn ssid(&mut self, elements: &Elements) {
        if let Some(ssid) = &elements.ssid {
            self.push(" (");
            for &c in ssid.iter().take_while(|&&c| c != 0) {
                print_char(&mut self.out, c);
            }
            self.push(")");
        }
    }

    fn rates(&mut self, elements: &Elements) {
        if let Some(rates) = &elements.rates {
            let mut sep = " [";
            for &rate in rates {
                let _ = write!(self.out, "{sep}{:.1}", 0.5 * f64::from(rate & 0x7f));
                if rate & 0x80 != 0 {
                    self.push("*");
                }
                sep = " ";
            }
            self.push(" Mbit]");
        }
    }
}

/// The information elements from `at` on (`length` bytes on the wire): what tcpdump keeps
/// of them, and `Err` where it stops (an element not captured or too long for its
/// buffer), after which the line still shows what came before.
fn elements(body: Bytes<'_>, at: usize, length: usize) -> (Elements, Step) {
    let mut found = Elements::default();
    let (mut at, mut length) = (at, length);
    while length != 0 {
        let (Ok(id), Ok(len)) = (body.u8(at), body.u8(at + 1)) else {
            return (found, Err("802.11"));
        };
        if length < 2 {
            return (found, Err("802.11"));
        }
        let len = usize::from(len);
        let Ok(value) = body.slice(at + 2, len) else {
            return (found, Err("802.11"));
        };
        if length < len + 2 {
            return (found, Err("802.11"));
        }
        match id {
            0 if len > 32 => return (found, Err("802.11")),
            0 => {
                found.ssid.get_or_insert_with(|| value.to_vec());
            }
            16 if len > 254 => return (found, Err("802.11")),
            16 => found.challenge = true,
            1 if len > 16 => return (found, Err("802.11")),
            1 if len != 0 => {
                found.rates.get_or_insert_with(|| value.to_vec());
            }
            3 if len == 1 => {
                found.channel.get_or_insert(value[0]);
            }
            _ => {}
        }
        at += 2 + len;
        length -= 2 + len;
    }
    (found, Ok(()))
}

/// 802.11 reason codes as tcpdump names them (the index is the code; past the end: `Reserved`).
const REASONS: [&str; 67] = [
    "Reserved",
    "Unspecified reason",
    "Previous authentication no longer valid",
    "Deauthenticated because sending STA is leaving (or has left) IBSS or ESS",
    "Disassociated due to inactivity",
    "Disassociated because AP is unable to handle all currently  associated STAs",
    "Class 2 frame received from nonauthenticated STA",
    "Class 3 frame received from nonassociated STA",
    "Disassociated because sending STA is leaving (or has left) BSS",
    "STA requesting (re)association is not authenticated with responding STA",
    "Disassociated because the information in the Power Capability element is unacceptable",
    "Disassociated because the information in the Supported Channels element is unacceptable",
    "Disassociated due to BSS transition management",
    "Invalid element, i.e., an element defined in this standard for which the content does not meet the specifications in Clause 9",
    "Message integrity code (MIC) failure",
    "4-Way Handshake timeout",
    "Group key handshake timeout",
    "Information element in 4-Way Handshake different from (Re)AssociationRequest/Probe Response/Beacon frame",
    "Invalid group cipher",
    "Invalid pairwise cipher",
    "Invalid AKMP",
    "Unsupported RSNE version",
    "Invalid RSNE capabilities",
    "IEEE 802.1X authentication failed",
    "Cipher suite rejected because of the security policy",
    "TDLS direct-link teardown due to TDLS peer STA unreachable via the TDLS direct link",
    "TDLS direct-link teardown for unspecified reason",
    "Disassociated because session terminated by SSP request",
    "Disassociated because of lack of SSP roaming agreement",
    "Requested service rejected because of SSP cipher suite or AKM requirement",
    "Requested service not authorized in this location",
    "TS deleted because QoS AP lacks sufficient bandwidth for this QoS STA due to a change in BSS service characteristics or operational mode (e.g. an HT BSS change from 40 MHz channel to 20 MHz channel)",
    "Disassociated for unspecified, QoS-related reason",
    "Disassociated because QoS AP lacks sufficient bandwidth for this QoS STA",
    "Disassociated because of excessive number of frames that need to be acknowledged, but are not acknowledged due to AP transmissions and/or poor channel conditions",
    "Disassociated because STA is transmitting outside the limits of its TXOPs",
    "Requested from peer STA as the STA is leaving the BSS (or resetting)",
    "Requested from peer STA as it does not want to use the mechanism",
    "Requested from peer STA as the STA received frames using the mechanism for which a set up is required",
    "Requested from peer STA due to time out",
    "Reserved",
    "Reserved",
    "Reserved",
    "Reserved",
    "Reserved",
    "Peer STA does not support the requested cipher suite",
    "In a DLS Teardown frame: The teardown was initiated by the DLS peer. In a Disassociation frame: Disassociated because authorized access limit reached",
    "In a DLS Teardown frame: The teardown was initiated by the AP. In a Disassociation frame: Disassociated due to external service requirements",
    "Invalid FT Action frame count",
    "Invalid pairwise master key identifier (PMKID)",
    "Invalid MDE",
    "Invalid FTE",
    "Mesh peering canceled for unknown reasons",
    "The mesh STA has reached the supported maximum number of peer mesh STAs",
    "The received information violates the Mesh Configuration policy configured in the mesh STA profile",
    "The mesh STA has received a Mesh Peering Close frame requesting to close the mesh peering",
    "The mesh STA has resent dot11MeshMaxRetries Mesh Peering Open frames, without receiving a Mesh Peering Confirm frame",
    "The confirmTimer for the mesh peering instance times out",
    "The mesh STA fails to unwrap the GTK or the values in the wrapped contents do not match",
    "The mesh STA receives inconsistent information about the mesh parameters between mesh peering Management frames",
    "The mesh STA fails the authenticated mesh peering exchange because due to failure in selecting either the pairwise ciphersuite or group ciphersuite",
    "The mesh STA does not have proxy information for this external destination",
    "The mesh STA does not have forwarding information for this destination",
    "The mesh STA determines that the link to the next hop of an active path in its forwarding information is no longer usable",
    "The Deauthentication frame was sent because the MAC address of the STA already exists in the mesh BSS",
    "The mesh STA performs channel switch to meet regulatory requirements",
    "The mesh STA performs channel switching with unspecified reason",
];

/// 802.11 status codes as tcpdump names them (the index is the code).
const STATUSES: [&str; 108] = [
    "Successful",
    "Unspecified failure",
    "TDLS wakeup schedule rejected but alternative schedule provided",
    "TDLS wakeup schedule rejected",
    "Reserved",
    "Security disabled",
    "Unacceptable lifetime",
    "Not in same BSS",
    "Reserved",
    "Reserved",
    "Cannot Support all requested capabilities in the Capability Information field",
    "Reassociation denied due to inability to confirm that association exists",
    "Association denied due to reason outside the scope of this standard",
    "Responding STA does not support the specified authentication algorithm",
    "Received an Authentication frame with authentication transaction sequence number out of expected sequence",
    "Authentication rejected because of challenge failure",
    "Authentication rejected due to timeout waiting for next frame in sequence",
    "Association denied because AP is unable to handle additional associated STAs",
    "Association denied due to requesting STA not supporting all of the data rates in the BSSBasicRateSet parameter, the Basic HT-MCS Set field of the HT Operation parameter, or the Basic VHT-MCS and NSS Set field in the VHT Operation parameter",
    "Association denied due to requesting STA not supporting the short preamble option",
    "Reserved",
    "Reserved",
    "Association request rejected because Spectrum Management capability is required",
    "Association request rejected because the information in the Power Capability element is unacceptable",
    "Association request rejected because the information in the Supported Channels element is unacceptable",
    "Association denied due to requesting STA not supporting the Short Slot Time option",
    "Reserved",
    "Association denied because the requested STA does not support HT features",
    "R0KH unreachable",
    "Association denied because the requesting STA does not support the phased coexistence operation (PCO) transition time required by the AP",
    "Association request rejected temporarily; try again later",
    "Robust management frame policy violation",
    "Unspecified, QoS-related failure",
    "Association denied because QoS AP or PCP has insufficient bandwidth to handle another QoS STA",
    "Association denied due to excessive frame loss rates and/or poor conditions on current operating channel",
    "Association (with QoS BSS) denied because the requesting STA does not support the QoS facility",
    "Reserved",
    "The request has been declined",
    "The request has not been successful as one or more parameters have invalid values",
    "The allocation or TS has not been created because the request cannot be honored; however, a suggested TSPEC/DMG TSPEC is provided so that the initiating STA can attempt to set another allocation or TS with the suggested changes to the TSPEC/DMG TSPEC",
    "Invalid element, i.e., an element defined in this standard for which the content does not meet the specifications in Clause 9",
    "Invalid group cipher",
    "Invalid pairwise cipher",
    "Invalid AKMP",
    "Unsupported RSNE version",
    "Invalid RSNE capabilities",
    "Cipher suite rejected because of security policy",
    "The TS or allocation has not been created; however, the HC or PCP might be capable of creating a TS or allocation, in response to a request, after the time indicated in the TS Delay element",
    "Direct Link is not allowed in the BSS by policy",
    "The Destination STA is not present within this BSS",
    "The Destination STA is not a QoS STA",
    "Association denied because the listen interval is too large",
    "Invalid FT Action frame count",
    "Invalid pairwise master key identifier (PMKID)",
    "Invalid MDE",
    "Invalid FTE",
    "Requested TCLAS processing is not supported by the AP or PCP",
    "The AP or PCP has insufficient TCLAS processing resources to satisfy the request",
    "The TS has not been created because the request cannot be honored; however, the HC or PCP suggests that the STA transition to a different BSS to set up the TS",
    "GAS Advertisement Protocol not supported",
    "No outstanding GAS request",
    "GAS Response not received from the Advertisement Server",
    "STA timed out waiting for GAS Query Response",
    "LARGE GAS Response is larger than query response length limit",
    "Request refused because home network does not support request",
    "Advertisement Server in the network is not currently reachable",
    "Reserved",
    "Request refused due to permissions received via SSPN interface",
    "Request refused because the AP or PCP does not support unauthenticated access",
    "Reserved",
    "Reserved",
    "Reserved",
    "Invalid contents of RSNE",
    "U-APSD coexistence is not supported",
    "Requested U-APSD coexistence mode is not supported",
    "Requested Interval/Duration value cannot be supported with U-APSD coexistence",
    "Authentication is rejected because an Anti-Clogging Token is required",
    "Authentication is rejected because the offered finite cyclic group is not supported",
    "The TBTT adjustment request has not been successful because the STA could not find an alternative TBTT",
    "Transmission failure",
    "Requested TCLAS Not Supported",
    "TCLAS Resources Exhausted",
    "Rejected with Suggested BSS transition",
    "Reject with recommended schedule",
    "Reject because no wakeup schedule specified",
    "Success, the destination STA is in power save mode",
    "FST pending, in process of admitting FST session",
    "Performing FST now",
    "FST pending, gap(s) in block ack window",
    "Reject because of U-PID setting",
    "Reserved",
    "Reserved",
    "(Re)Association refused for some external reason",
    "(Re)Association refused because of memory limits at the AP",
    "(Re)Association refused because emergency services are not supported at the AP",
    "GAS query response not yet received",
    "Reject since the request is for transition to a frequency band subject to DSE procedures and FST Initiator is a dependent STA",
    "Requested TCLAS processing has been terminated by the AP",
    "The TS schedule conflicts with an existing schedule; an alternative schedule is provided",
    "The association has been denied; however, one or more Multi-band elements are included that can be used by the receiving STA to join the BSS",
    "The request failed due to a reservation conflict",
    "The request failed due to exceeded MAF limit",
    "The request failed due to exceeded MCCA track limit",
    "Association denied because the information in theSpectrum Management field is unacceptable",
    "Association denied because the requesting STA does not support VHT features",
    "Enablement denied",
    "Enablement denied due to restriction from an authorized GDB",
    "Authorization deenabled",
];
