package testfiles

import "testing"

// Facts of [DMCAPDF].
const (
	DMCAName  = "dmca.pdf"
	DMCAPages = 18
	// DMCAQuestion is answered on page DMCAAnswerPage, and there only.
	DMCAQuestion   = "Which title of the DMCA creates protection for the design of vessel hulls?"
	DMCAAnswerPage = 17
)

// DMCAPDF returns an 18-page summary of the Digital Millennium Copyright Act,
// one part of the Act to a page, written for these tests. Page 17, on Title V,
// answers [DMCAQuestion]; the other pages use the same legal vocabulary, so
// that a search has something to rank the answer against. Like many
// published PDFs it is encrypted with an empty user password: anyone may
// open it.
func DMCAPDF() []byte {
	pdf := PDF{Flate: true, Encrypt: true}
	for _, page := range dmcaPages {
		pdf.Pages = append(pdf.Pages, ProsePage(page...))
	}
	return pdf.Bytes()
}

// DMCA writes [DMCAPDF] to dir/dmca.pdf and returns the path.
func DMCA(tb testing.TB, dir string) string {
	tb.Helper()
	return Write(tb, dir, DMCAName, DMCAPDF())
}

// dmcaPages are the paragraphs of each page; the first is its heading.
var dmcaPages = [DMCAPages][]string{
	{ // 1
		"The Digital Millennium Copyright Act: A Plain Summary",
		"This summary walks through the Digital Millennium Copyright Act, the statute signed in October 1998 to bring United States copyright law into the networked age. It is meant for readers who need to know what each part of the Act does without working through the statute itself. It is not legal advice: where a question turns on the exact words of the law, the statute and the regulations govern.",
		"The Act is organised in five titles. Each title can be read on its own, and several of them amend different chapters of title 17 of the United States Code. The pages that follow take the titles in order and close with the dates on which the provisions took effect.",
	},
	{ // 2
		"How the Act Is Organised",
		"Title I carries out two treaties concluded at the World Intellectual Property Organization in December 1996. Besides adjusting how foreign works are protected, it adds two new sets of prohibitions: one against defeating the technical locks that control access to works, and one against tampering with the information that identifies a work and its owner.",
		"Title II limits the liability of companies that provide online services when material their users post or transmit turns out to infringe. Title III allows a computer to be switched on for maintenance or repair even though that copies the programs stored in it. Title IV gathers several unrelated changes, among them rules for libraries, for distance education and for broadcasters. Title V sets up a separate kind of protection for one kind of industrial design.",
		"Because the titles were drafted by different committees, their definitions do not always match. A term defined for one title should not be assumed to carry the same meaning in another.",
	},
	{ // 3
		"Title I: Implementing the WIPO Treaties",
		"The two treaties are the WIPO Copyright Treaty and the WIPO Performances and Phonograms Treaty. Much of what they require was already part of American law, so the changes Title I makes to existing sections are modest. Its first task is to protect works from countries that join the treaties in the same way the law already protected works from members of the Berne Convention and the World Trade Organization.",
		"To do this, the Act amends the definitions in section 101 and the rules on national origin in section 104. A work first published in a treaty country, or created by a national of one, is eligible for protection here. Sound recordings receive similar treatment under the phonograms treaty, and the provisions on restored works are updated to cover works from treaty countries.",
	},
	{ // 4
		"Title I: Circumvention of Technological Measures",
		"The centre of Title I is a new chapter 12 of title 17. Section 1201 divides technological measures into two kinds: those that control access to a work, such as a password or an encrypted stream that only an authorised player can unlock, and those that protect the rights of the copyright owner once access has been granted, such as a limit on making copies.",
		"The Act forbids the act of circumventing an access control. It does not forbid circumventing a copy control, because the copying may be a fair use, but it does forbid making or selling tools for either purpose. A device or service is caught if it is primarily designed to circumvent, has only limited commercially significant purpose other than circumvention, or is marketed for that use.",
		"Nothing in section 1201 changes the rights, remedies or defenses that exist for infringement itself, including fair use. The prohibitions stand beside copyright law rather than inside it.",
	},
	{ // 5
		"Title I: Exceptions to the Anti-Circumvention Rules",
		"Congress wrote several narrow exceptions into section 1201. A nonprofit library, archive or school may gain access to a work solely to decide whether to acquire it. Government agencies may act in the course of law enforcement, intelligence and information security work.",
		"Reverse engineering is allowed to the extent needed to make an independently created program work with other programs. Good-faith encryption research and security testing are permitted under conditions, including that the researcher first tried to obtain permission. A parent may use a tool that keeps minors away from material on the internet, and a person may disable a measure that secretly collects personal information.",
		"Each exception has its own conditions, and none of them is a general licence. A use that falls outside their terms must be justified, if at all, under the rulemaking described on the next page.",
	},
	{ // 6
		"Title I: Rulemaking, Management Information and Remedies",
		"Because the ban on circumventing access controls could block lawful uses, the Act asks the Librarian of Congress, on the recommendation of the Register of Copyrights, to hold a rulemaking every three years. Classes of works whose users are likely to be adversely affected in making non-infringing uses are exempted for the following three years.",
		"Section 1202 protects copyright management information: the title, the author, the owner, the terms of use and similar data conveyed with a work. It is unlawful to supply false information of this kind knowingly and with intent to induce or conceal infringement, or to remove or alter it without authority.",
		"Violations of sections 1201 and 1202 give rise to civil actions in which courts may award damages and injunctions. Willful violations for commercial advantage or private financial gain are criminal offenses. Nonprofit libraries, archives, schools and public broadcasters are exempt from the criminal provisions.",
	},
	{ // 7
		"Title II: Online Service Provider Liability",
		"Title II, the Online Copyright Infringement Liability Limitation Act, adds section 512 to title 17. It creates four safe harbors for service providers. A provider that qualifies is shielded from money damages and faces only limited injunctions for the infringing acts of others that fall within a harbor.",
		"The safe harbors do not decide whether a provider infringes. If a provider does not qualify, the ordinary rules of direct, contributory and vicarious liability apply. Qualifying for one harbor says nothing about the others: each is assessed separately.",
		"Two definitions of service provider are used. The narrow one, for the first harbor, covers entities that transmit or route material chosen by others without changing it. The broad one, for the rest, covers providers of online services or network access in general.",
	},
	{ // 8
		"Title II: Conduits and Caching",
		"The first safe harbor covers transitory digital network communications: material passing through a provider's system at the request of someone else. The transmission must be started by a person other than the provider, carried out by an automatic technical process, sent to recipients the provider did not select, and passed on without changes to its content.",
		"The second safe harbor covers system caching, the practice of keeping copies of popular material so that later requests can be answered faster. The provider must not modify the material, must follow the original site's reasonable rules for refreshing it, and must not interfere with technology that reports usage back to that site.",
		"A provider that caches material which a site offered only to paying or registered users must respect those conditions, and must remove cached copies promptly once told that the original has been taken down.",
	},
	{ // 9
		"Title II: Material Stored at the Direction of Users",
		"The third safe harbor applies to material that users store on a provider's system, such as a web page or a forum post. The provider must not know the material is infringing or be aware of facts that make infringement apparent, must not receive a financial benefit directly attributable to the infringement where it can control it, and must act quickly to remove it once it learns of the problem.",
		"The Act sets out a notice-and-takedown procedure. A provider designates an agent to receive notices and registers the agent with the Copyright Office. A valid notice identifies the work, identifies the infringing material well enough to locate it, gives contact information, and includes statements of good faith and, under penalty of perjury, of authority to act.",
		"A subscriber whose material was removed may send a counter-notification. The provider then informs the complaining party and restores the material within ten to fourteen business days unless it learns that a court action has been filed.",
	},
	{ // 10
		"Title II: Location Tools and Conditions of Eligibility",
		"The fourth safe harbor covers information location tools, such as directories, indexes and hyperlinks that refer users to an online location holding infringing material. Its conditions mirror those of the third harbor, including the notice-and-takedown procedure.",
		"To be eligible for any safe harbor, a provider must adopt, reasonably implement and inform its users of a policy for terminating, in appropriate circumstances, the accounts of repeat infringers. It must also accommodate standard technical measures that copyright owners use to identify or protect their works.",
		"A provider is not required to monitor its service or to seek out facts indicating infringing activity in order to qualify, except to the extent that a standard technical measure calls for it.",
	},
	{ // 11
		"Title II: Schools, Subpoenas and Injunctions",
		"Special rules address nonprofit colleges and universities acting as service providers. When a faculty member or graduate student performing teaching or research functions is responsible for an infringement, that person's knowledge is not attributed to the institution, provided that conditions on course materials, notices and information about copyright are met.",
		"A copyright owner may ask the clerk of any federal district court to issue a subpoena requiring a provider to identify an alleged infringer. The request must include a copy of the takedown notice and a declaration that the information will be used only to protect rights under the copyright law.",
		"Where a provider qualifies for a safe harbor, a court may only order it to disable access to specific material or to terminate specific accounts, and must weigh the burden on the provider against the harm to the owner.",
	},
	{ // 12
		"Title III: Computer Maintenance or Repair",
		"Title III, the Computer Maintenance Competition Assurance Act, answers court decisions holding that an independent technician infringed copyright by switching on a customer's computer, because doing so loaded a copy of the operating system into memory. The title amends section 117 to permit that copy.",
		"The exemption applies only when the copy is made automatically by turning on the machine, the machine lawfully contains an authorised copy of the program, the new copy is used for nothing but the maintenance or repair and is destroyed right afterwards, and programs not needed to start the machine are not used.",
		"Maintenance means servicing the machine to keep it working according to its original specifications and any changes authorised for it. Repair means restoring it to working order. Neither covers adding new features.",
	},
	{ // 13
		"Title IV: Copyright Office, Distance Education and Libraries",
		"Title IV begins by confirming the policy role of the Register of Copyrights, who advises Congress, assists the executive branch on international matters and conducts studies. It then directs the Register to consult educators, libraries and copyright owners and to report on how to promote distance education through digital technologies.",
		"The title updates section 108, which lets libraries and archives make copies for preservation and for their users. Up to three copies may now be made for preservation or replacement instead of one, and they may be digital as long as a digital copy is not made available to the public outside the library's premises.",
		"A library may also copy a work to replace a format that has become obsolete, meaning that the machine needed to perceive the work is no longer made or reasonably available in the commercial marketplace.",
	},
	{ // 14
		"Title IV: Ephemeral Recordings and Webcasting",
		"Broadcasters have long been allowed to make ephemeral recordings, temporary copies of a program made so that it can be transmitted later. Title IV extends this exemption to radio broadcasters who transmit digital performances of sound recordings, and adjusts how long the copies may be kept.",
		"The title also amends the statutory licence for digital audio transmissions created in 1995. It brings webcasters, services that stream music over the internet without letting listeners choose each song, within the licence, and sets the conditions they must meet, such as limits on announcing songs in advance and on playing many songs from one album in a short period.",
		"Rates and terms for the licence are set by voluntary negotiation or, failing agreement, by an arbitration panel, on the basis of what a willing buyer and a willing seller would have agreed in the marketplace.",
	},
	{ // 15
		"Title IV: Other Provisions",
		"A further provision deals with collective bargaining agreements in the motion picture industry. When the rights to a film are transferred, the new owner takes on the obligation to pay residuals to the writers, directors and actors under the agreements that covered the film, if the new owner knew or had reason to know of them.",
		"Title IV also makes technical amendments that correct cross-references and terminology elsewhere in title 17.",
		"None of these provisions changes the basic scope of the exclusive rights. They are adjustments made at the same time because the Act offered a convenient vehicle, and commentators often discuss them apart from the rest of the Act.",
	},
	{ // 16
		"Studies and Reports Required by the Act",
		"The Act asks for several studies. The Register was to report within six months on distance education. The Register and the Assistant Secretary of Commerce for Communications and Information were to examine how the Act and technological change affect the first-sale doctrine in section 109 and the exemption for computer programs in section 117.",
		"Other studies concern encryption research under the new prohibitions and the effect of the statutory licence for digital audio transmissions on the market. Each report went to the judiciary committees of the House and the Senate.",
		"These reports are useful background for anyone interpreting the Act, because they record how the agencies understood its provisions soon after enactment.",
	},
	{ // 17
		"Title V: Vessel Hull Design Protection",
		"Title V of the DMCA is the Vessel Hull Design Protection Act. It creates a new form of protection for the design of vessel hulls, added to title 17 as a separate chapter 13 rather than as part of copyright. The owner of an original design of a vessel hull that makes the hull attractive or distinctive in appearance may claim this protection.",
		"For this purpose a vessel is a craft that navigates on water under its own power and is designed to carry at least one person; the hull is its frame or body, including the deck but not the masts, sails, yards and rigging. Protection of a hull design begins when the design is registered or first made public, whichever comes first, and lasts ten years.",
		"An application to register a vessel hull design must be filed within two years after the design is first made public, and the Copyright Office runs the registration system. Designs that are staple or commonplace, or dictated solely by the function of the hull, are not protected, and a design that receives a design patent loses the Title V protection.",
	},
	{ // 18
		"Effective Dates",
		"Most of the Act took effect on the day it was signed, October 28, 1998. The amendments in Title I that depend on the treaties took effect when the treaties entered into force for the United States.",
		"The prohibition on circumventing access controls took effect two years after enactment, leaving time for the first rulemaking by the Librarian of Congress, which was completed in October 2000.",
		"Readers who want more detail should consult the text of the Act in the Statutes at Large, the reports of the congressional committees, and the regulations issued by the Copyright Office under sections 512 and 1201.",
	},
}
